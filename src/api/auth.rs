//! Request authentication: bearer tokens (several, for rotation) and HTTP basic credentials, compared in constant
//! time (on SHA-256 digests, so neither content nor length leaks through timing).

use actix_web::HttpRequest;
use actix_web::http::header;
use base64::Engine;
use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::ApiError;
use crate::configuration::AuthSettings;

pub struct Auth {
    tokens: Vec<[u8; 32]>,
    basic: Vec<[u8; 32]>,
}

fn digest(s: &[u8]) -> [u8; 32] {
    Sha256::digest(s).into()
}

fn any_equal(candidates: &[[u8; 32]], presented: &[u8; 32]) -> bool {
    // Compare against every candidate, no early exit.
    candidates
        .iter()
        .fold(subtle::Choice::from(0), |acc, c| acc | c.ct_eq(presented))
        .into()
}

impl Auth {
    pub fn new(s: &AuthSettings) -> Self {
        Self {
            tokens: s
                .bearer_tokens
                .iter()
                .map(|t| digest(t.expose_secret().as_bytes()))
                .collect(),
            basic: s
                .basic
                .iter()
                .map(|b| digest(format!("{}:{}", b.username, b.password.expose_secret()).as_bytes()))
                .collect(),
        }
    }

    pub fn enabled(&self) -> bool {
        !self.tokens.is_empty() || !self.basic.is_empty()
    }

    pub fn check(&self, req: &HttpRequest) -> Result<(), ApiError> {
        if !self.enabled() {
            return Ok(());
        }
        let deny = ApiError::Unauthorized {
            basic: !self.basic.is_empty(),
        };
        let Some(value) = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
            return Err(deny);
        };
        let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
        let ok = if scheme.eq_ignore_ascii_case("bearer") {
            any_equal(&self.tokens, &digest(rest.trim().as_bytes()))
        } else if scheme.eq_ignore_ascii_case("basic") {
            match base64::engine::general_purpose::STANDARD.decode(rest.trim()) {
                Ok(decoded) => any_equal(&self.basic, &digest(&decoded)),
                Err(_) => false,
            }
        } else {
            false
        };
        if ok { Ok(()) } else { Err(deny) }
    }
}
