//! The SMTP connection, from the `smtp` section: the URL's scheme and `tls` parameter say how it is secured, with
//! optional AUTH and an extra trusted CA. Errors never quote the URL: it could carry credentials.

use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::transport::smtp::{AsyncSmtpTransportBuilder, PoolConfig};
use lettre::{AsyncSmtpTransport, Tokio1Executor};
use secrecy::ExposeSecret;

use super::SmtpSettings;

/// How the connection to the relay is secured, from the URL's scheme and `tls` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Security {
    Plain,
    Opportunistic,
    StartTls,
    Implicit,
}

/// Turns `smtp.url` (+ credentials, CA, timeout) into a transport builder. Errors never quote the URL: it could
/// carry credentials.
pub(super) fn transport_builder(smtp: &SmtpSettings) -> Result<AsyncSmtpTransportBuilder, String> {
    let url = url::Url::parse(&smtp.url).map_err(|e| format!("smtp.url is not a valid URL: {e}"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("smtp.url must not carry credentials: set smtp.username and smtp.password".into());
    }
    let host = url.host_str().ok_or("smtp.url needs a host")?.to_string();
    let tls = url.query_pairs().find(|(k, _)| k == "tls").map(|(_, v)| v.into_owned());
    let (security, default_port) = match (url.scheme(), tls.as_deref()) {
        ("smtp", None | Some("none")) => (Security::Plain, 25),
        ("smtp", Some("opportunistic")) => (Security::Opportunistic, 587),
        ("smtp", Some("required")) => (Security::StartTls, 587),
        ("smtps", None) => (Security::Implicit, 465),
        (scheme, tls) => {
            return Err(format!(
                "smtp.url: unsupported scheme {scheme:?} with tls={tls:?} (use smtp://, smtp://…?tls=required or smtps://)"
            ));
        }
    };
    let port = url.port().unwrap_or(default_port);

    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host.clone())
        .port(port)
        .timeout(Some(smtp.timeout))
        .pool_config(PoolConfig::new().max_size(4));
    if url.path().len() > 1 {
        let name = url.path().trim_matches('/').to_string();
        builder = builder.hello_name(lettre::transport::smtp::extension::ClientId::Domain(name));
    }
    if security != Security::Plain {
        let mut params = TlsParameters::builder(host);
        if let Some(path) = &smtp.ca_file {
            let pem = std::fs::read(path).map_err(|e| format!("smtp.ca_file: cannot read {path}: {e}"))?;
            let cert = Certificate::from_pem(&pem).map_err(|e| format!("smtp.ca_file: {path}: {e}"))?;
            params = params.add_root_certificate(cert);
        }
        let params = params.build().map_err(|e| format!("smtp: TLS setup failed: {e}"))?;
        builder = builder.tls(match security {
            Security::Opportunistic => Tls::Opportunistic(params),
            Security::StartTls => Tls::Required(params),
            _ => Tls::Wrapper(params),
        });
    } else if smtp.ca_file.is_some() {
        return Err("smtp.ca_file is set but smtp.url uses no TLS (add ?tls=required or use smtps://)".into());
    }
    match (&smtp.username, &smtp.password) {
        (Some(user), Some(pass)) => {
            builder = builder.credentials(Credentials::new(user.clone(), pass.expose_secret().to_string()));
        }
        (None, None) => {}
        _ => return Err("smtp.username and smtp.password go together".into()),
    }
    Ok(builder)
}
