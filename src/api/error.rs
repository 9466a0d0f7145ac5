//! The one API error type: client mistakes map to 4xx with a message that says what to fix, a store outage to 503
//! with `Retry-After` (so Argo CD retries), anything else to an opaque 500 whose cause is logged.

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpResponse, ResponseError};
use serde_json::json;

use crate::argocd::PayloadError;
use crate::pipeline::PipelineError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unprocessable(String),
    #[error("{0}")]
    NotFound(String),
    /// The request is right but the resource is in a state that does not allow it (an incident that resolved).
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("the body is larger than this endpoint takes ({0} bytes; for events: server.max_body_bytes)")]
    TooLarge(usize),
    #[error("authentication required")]
    Unauthorized { basic: bool },
    /// A request whose own signature is its credential (Slack's) and does not hold: 401 with why, no challenge.
    #[error("{0}")]
    Unsigned(String),
    /// A valid credential without the scope this needs.
    #[error("{0}")]
    Forbidden(String),
    /// A credential bound to teams (`teams:`) asked to act on another team's incident, Application or silence: 403
    /// with which teams it has and which team that is.
    #[error("{message}")]
    OtherTeam {
        message: String,
        credential: String,
        teams: Vec<String>,
        team: String,
    },
    /// A state-changing request whose body is not JSON (a browser form cannot send JSON across sites).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// A `Host` that is not in `server.allowed_hosts` (DNS rebinding).
    #[error("{0}")]
    MisdirectedRequest(String),
    #[error("{message}")]
    TooManyRequests { message: String, retry_after: u64 },
    #[error("the store is unavailable; try again")]
    Unavailable,
    #[error("internal error")]
    Internal,
}

impl From<PayloadError> for ApiError {
    fn from(e: PayloadError) -> Self {
        match e {
            PayloadError::Empty
            | PayloadError::PlainText { .. }
            | PayloadError::InvalidJson { .. }
            | PayloadError::TooDeep(_) => ApiError::BadRequest(e.to_string()),
            _ => ApiError::Unprocessable(e.to_string()),
        }
    }
}

impl From<PipelineError> for ApiError {
    fn from(e: PipelineError) -> Self {
        if e.is_unavailable() {
            tracing::warn!(error = %e, "store unavailable");
            ApiError::Unavailable
        } else {
            tracing::error!(error = %e, "store error");
            ApiError::Internal
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unauthorized { .. } | ApiError::Unsigned(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::OtherTeam { .. } => StatusCode::FORBIDDEN,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::MisdirectedRequest(_) => StatusCode::MISDIRECTED_REQUEST,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut resp = HttpResponse::build(self.status_code());
        match self {
            ApiError::Unauthorized { basic } => {
                // Basic first: a browser shows its login dialog for the first scheme it knows.
                let challenge = if *basic {
                    "Basic realm=\"herald\", charset=\"UTF-8\", Bearer realm=\"herald\""
                } else {
                    "Bearer realm=\"herald\""
                };
                resp.insert_header((header::WWW_AUTHENTICATE, challenge));
            }
            ApiError::Unavailable => {
                resp.insert_header((header::RETRY_AFTER, "5"));
            }
            ApiError::TooManyRequests { retry_after, .. } => {
                resp.insert_header((header::RETRY_AFTER, retry_after.to_string()));
            }
            ApiError::MethodNotAllowed(_) => {
                resp.insert_header((header::ALLOW, "POST, PUT"));
            }
            _ => {}
        }
        if let ApiError::OtherTeam {
            credential,
            teams,
            team,
            ..
        } = self
        {
            return resp.json(json!({
                "error": capped(&self.to_string()),
                "status": 403,
                "credential": credential,
                "teams": teams,
                "team": team,
            }));
        }
        resp.json(json!({"error": capped(&self.to_string()), "status": self.status_code().as_u16()}))
    }
}

/// An error answer echoes at most this much of what the client sent (a 3 MB query key is not sent back whole).
const MAX_MESSAGE: usize = 600;

fn capped(message: &str) -> String {
    if message.len() <= MAX_MESSAGE {
        return message.to_string();
    }
    let mut end = MAX_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &message[..end], message.len())
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        assert_eq!(super::capped("short"), "short");
        let long = "é".repeat(1000);
        let cut = super::capped(&long);
        assert!(cut.len() < 700 && cut.ends_with("(2000 bytes in all)"), "{cut}");
    }
}
