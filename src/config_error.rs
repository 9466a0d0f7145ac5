//! A configuration error, which names the key path that is wrong ([`ConfigError`]), and the checks of a URL every
//! section shares (http(s) only; an error never repeats the credentials a URL may carry). A leaf: it imports no
//! other module of Herald, so the settings of every part (`configuration`, each receiver's own) can use it.

/// A configuration error; the message names the key path.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read configuration: {0}")]
    Load(String),
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Many(Vec<ConfigError>),
}

pub(crate) fn invalid(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        path: path.into(),
        message: message.into(),
    }
}

pub(crate) fn check_url(errors: &mut Vec<ConfigError>, path: &str, u: &str) {
    match url::Url::parse(u) {
        Ok(p) if p.scheme() == "http" || p.scheme() == "https" => {}
        _ => errors.push(invalid(path, format!("{} is not an http(s) URL", shown_url(u)))),
    }
}

/// A URL as an error may repeat it (quoted): without the user and password it may carry and with the value of each
/// query parameter hidden (`ftp://alice:s3cret@host/x?token=abc` is shown as `"ftp://***@host/x?token=***"`); a
/// value that is no URL but holds an `@` or a `?` is not shown at all. Every configuration error that names a URL
/// goes through here.
pub(crate) fn shown_url(u: &str) -> String {
    let hidden = || "the value (not shown: it may carry credentials)".to_string();
    let Ok(mut p) = url::Url::parse(u) else {
        return if u.contains(['@', '?']) {
            hidden()
        } else {
            format!("{u:?}")
        };
    };
    if (!p.username().is_empty() || p.password().is_some())
        && (p.set_username("***").is_err() || p.set_password(None).is_err())
    {
        return format!("a {:?} URL (not shown: it carries credentials)", p.scheme());
    }
    if p.query().is_some() {
        let names: Vec<String> = p.query_pairs().map(|(k, _)| format!("{k}=***")).collect();
        p.set_query(Some(&names.join("&")));
    }
    // `alice:s3cret@host` parses as the scheme `alice` with a path: an `@` left is no URL's user part.
    match p.as_str().replace("***@", "") {
        rest if rest.contains('@') => hidden(),
        _ => format!("{:?}", p.as_str()),
    }
}

/// [`check_url`] for a URL that carries a secret (a webhook's path or key): the error does not repeat it.
pub(crate) fn check_secret_url(errors: &mut Vec<ConfigError>, path: &str, u: &secrecy::SecretString) {
    use secrecy::ExposeSecret;
    match url::Url::parse(u.expose_secret()) {
        Ok(p) if (p.scheme() == "http" || p.scheme() == "https") && p.host().is_some() => {}
        Ok(p) => errors.push(invalid(
            path,
            format!(
                "is not an http(s) URL (scheme {:?}; value not shown, it is a secret)",
                p.scheme()
            ),
        )),
        Err(e) => errors.push(invalid(
            path,
            format!("is not a URL: {e} (value not shown, it is a secret)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_refused_is_never_repeated_with_its_credentials() {
        for (u, shown) in [
            (
                "ftp://alice:s3cret-pass@matrix.example/x",
                "\"ftp://***@matrix.example/x\"",
            ),
            (
                "matrix://alice:s3cret-pass@matrix.example",
                "\"matrix://***@matrix.example\"",
            ),
            ("alice:s3cret-pass@matrix.example", "not shown"),
            (
                "ftp://matrix.example/x?token=s3cret-tok&room=s3cret-room",
                "\"ftp://matrix.example/x?token=***&room=***\"",
            ),
            ("matrix.example?token=s3cret-tok", "not shown"),
            ("not a url", "\"not a url\""),
        ] {
            let mut errors = Vec::new();
            check_url(&mut errors, "receivers[0].matrix.homeserver", u);
            let text = errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
            assert!(text.contains(shown), "{u}: {text}");
            assert!(!text.contains("s3cret"), "{u}: {text}");
        }
        let mut errors = Vec::new();
        check_url(&mut errors, "x", "https://alice:s3cret@matrix.example");
        assert!(
            errors.is_empty(),
            "credentials in an http(s) URL are the receiver's business"
        );
    }
}
