//! The console receiver: prints each rendered message to standard output (and optionally appends it to a file).
//! The embedded default configuration uses it, so a first run shows notifications without any setup.

use std::io::Write;

use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::configuration::ConsoleSettings;
use crate::domain::Notification;
use crate::receivers::render;

pub struct Console {
    settings: ConsoleSettings,
    template: Option<String>,
}

impl Console {
    pub fn new(settings: ConsoleSettings, template: Option<String>) -> Self {
        Self { settings, template }
    }
}

#[async_trait::async_trait]
impl Receiver for Console {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let body = render::custom_text(self.template.as_deref(), n)?.unwrap_or_else(|| render::text(n));
        let message = format!(
            "==> [{}] {} {}\n{}\n",
            n.receiver,
            render::status_word(n),
            n.thread_key,
            body
        );
        if let Some(path) = &self.settings.file {
            // One JSON line per notification, so tests and scripts can read exactly what was delivered.
            let line = serde_json::to_string(n).map_err(|e| DeliveryError::permanent(e.to_string()))?;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| DeliveryError::transient(format!("cannot write {path}: {e}")))?;
            writeln!(f, "{line}").map_err(|e| DeliveryError::transient(format!("cannot write {path}: {e}")))?;
        }
        // print! rather than a raw stdout handle, so test harnesses capture it like any other output.
        print!("{message}");
        let _ = std::io::stdout().flush();
        Ok(Delivered {
            memo: None,
            detail: "printed".into(),
        })
    }
}
