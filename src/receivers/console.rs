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
    json: bool,
}

impl Console {
    pub fn new(settings: ConsoleSettings, template: Option<String>) -> Self {
        Self {
            settings,
            template,
            json: false,
        }
    }

    /// With `log.format: json`: one JSON object per notification, so standard output stays a stream of JSON
    /// lines for the log collector (the text, newlines escaped, is a field; the thread key is left out).
    pub fn json_lines(mut self, json: bool) -> Self {
        self.json = json;
        self
    }
}

#[async_trait::async_trait]
impl Receiver for Console {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let body = match &self.template {
            Some(t) => render::with_template(t, n).map_err(|e| DeliveryError::permanent(format!("template: {e}")))?,
            None => render::text(n),
        };
        let message = if self.json {
            let line = serde_json::json!({
                "level": "INFO",
                "target": module_path!(),
                "message": n.title,
                "receiver": n.receiver,
                "status": render::status_word(n),
                "reason": n.reason,
                "text": body,
                "created_at": n.created_at,
            });
            format!("{line}\n")
        } else {
            format!(
                "==> [{}] {} {}\n{}\n",
                n.receiver,
                render::status_word(n),
                n.thread_key,
                body
            )
        };
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
