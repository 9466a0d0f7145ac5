//! The console receiver: prints each rendered message to standard output (and optionally appends it to a file).
//! The embedded default configuration uses it, so a first run shows notifications without any setup.

use std::io::Write;
use std::sync::Arc;

use serde::Deserialize;

use super::{Capabilities, Delivered, DeliveryError, Integration, Memo, Receiver, Sections, Shared};
use crate::configuration::{ConfigError, ReceiverSettings};
use crate::domain::Notification;
use crate::receivers::render;

/// `console: {file}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Also append each rendered message to this file (handy for tests and demos).
    pub file: Option<String>,
}

impl Integration for Config {
    /// The console shows resolves too, and is where notifications go when no team claims them.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            sends_resolved: true,
            fallback: true,
            ..Capabilities::MESSAGES
        }
    }

    fn validate(&self, _path: &str, _sections: &Sections<'_>, _errors: &mut Vec<ConfigError>) {}

    fn build(&self, r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        let json = shared.settings.log.format == crate::configuration::LogFormat::Json;
        Ok(Arc::new(
            Console::new(self.clone(), r.template.clone()).json_lines(json),
        ))
    }
}

pub struct Console {
    settings: Config,
    template: Option<String>,
    json: bool,
}

impl Console {
    pub fn new(settings: Config, template: Option<String>) -> Self {
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

/// How a template's values are written: control characters shown as escapes.
pub const TEMPLATE_ESCAPE: render::TemplateEscape = render::escape::console;

/// What is printed for `n`: a line naming the receiver, the status and the thread, then `body`.
pub fn message(n: &Notification, body: &str) -> String {
    format!(
        "==> [{}] {} {}\n{}\n",
        render::escape::console(&n.receiver),
        render::status_word(n),
        render::escape::console(&n.thread_key),
        body
    )
}

#[async_trait::async_trait]
impl Receiver for Console {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let body = render::custom_text(self.template.as_deref(), n, TEMPLATE_ESCAPE)?
            .unwrap_or_else(|| render::console_text(n));
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
            message(n, &body)
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
