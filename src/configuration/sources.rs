//! Where settings come from before they are typed: the YAML file, then the `HERALD__SECTION__KEY` environment, merged
//! here (an environment key with a number, `HERALD__RECEIVERS__1__SLACK__TOKEN`, sets that element of a list), then
//! every `<secret>_file` key replaced by the content of the file it names (Alertmanager's convention, so Kubernetes
//! Secrets can be mounted as files instead of written into a ConfigMap).

use serde_json::{Map, Value};
use std::path::Path;
use std::time::Duration;

use super::{ConfigError, invalid};

/// The keys whose value may instead be read from a file named by `<key>_file`. They are the secrets (and `url`,
/// which carries a key for webhook receivers and a password for PostgreSQL).
const FILE_KEYS: [&str; 14] = [
    "token",
    "bot_token",
    "access_token",
    "password",
    "webhook_url",
    "routing_key",
    "hmac_secret",
    "url",
    "bearer_tokens",
    "ingest_tokens",
    "read_tokens",
    "api_key",
    "link_signing_key",
    "signing_secret",
];

/// The token lists: comma-separated in the environment, one per line in a `<key>_file`.
const TOKEN_LISTS: [&str; 3] = ["bearer_tokens", "ingest_tokens", "read_tokens"];

/// How a file that may have been caught half-written is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reading {
    /// At start: the file is what the operator deployed.
    Start,
    /// On SIGHUP, while a writer may be at work: a file whose last line has no line break is refused too (a writer
    /// caught half-way leaves a valid file whose last token is a prefix of the real one), and a `<secret>_file` is
    /// taken only once it has stayed the same for a second ([`read_secret`]).
    Reload,
}

/// Reads the YAML file (when given) and the environment, and merges the environment over the file. The file is read
/// once, whole, into memory ([`read_whole`]), and that content is what is checked, parsed and validated.
pub(super) fn read(file: Option<&Path>, optional: bool, reading: Reading) -> Result<Value, ConfigError> {
    let mut value = Value::Null;
    if let Some(f) = file {
        if f.exists() {
            let bytes = read_whole(f, |p| std::fs::read(p))?;
            if reading == Reading::Reload && !bytes.is_empty() && !bytes.ends_with(b"\n") {
                return Err(ConfigError::Load(format!(
                    "{}: the file does not end with a line break, so it may be cut (a writer caught half-way leaves \
                     a valid file whose last token is a prefix of the real one); a reload takes only whole files: \
                     write it whole (an editor, kubectl and a ConfigMap end it with a line break), then reload again",
                    f.display()
                )));
            }
            let text =
                String::from_utf8(bytes).map_err(|_| ConfigError::Load(format!("{}: not UTF-8 text", f.display())))?;
            let raw = config::Config::builder()
                .add_source(config::File::from_str(&text, config::FileFormat::Yaml))
                .build()
                .map_err(|e| ConfigError::Load(format!("{}: {e}", f.display())))?;
            value = raw.try_deserialize().map_err(|e| ConfigError::Load(e.to_string()))?;
        } else if !optional {
            return Err(ConfigError::Load(format!("{}: no such file", f.display())));
        }
    }
    let env = config::Config::builder()
        .add_source(
            config::Environment::with_prefix("HERALD")
                .prefix_separator("__")
                .separator("__")
                .try_parsing(true)
                .list_separator(",")
                .with_list_parse_key("server.auth.bearer_tokens")
                .with_list_parse_key("server.auth.ingest_tokens")
                .with_list_parse_key("server.auth.read_tokens")
                .with_list_parse_key("grouping.group_by"),
        )
        .build()
        .map_err(|e| ConfigError::Load(e.to_string()))?;
    let mut env: Value = env.try_deserialize().map_err(|e| ConfigError::Load(e.to_string()))?;
    drop_blank_tokens(&mut env);
    keeps_instance_bindings(&value, &env)?;
    merge(&mut value, env);
    Ok(value)
}

/// Refuses an environment list (`HERALD__SERVER__AUTH__INGEST_TOKENS=a,b`) that would replace a file's
/// `server.auth.ingest_tokens` whose entries bind tokens to Argo CD instances: the plain tokens that replace them
/// speak for no instance, so a body would be told apart by its `context.argocdUrl` only and one Argo CD's token
/// could send for another — while the configuration looked fine. One entry's field (`…__INGEST_TOKENS__0__TOKEN`)
/// merges into that entry and keeps its binding.
fn keeps_instance_bindings(file: &Value, env: &Value) -> Result<(), ConfigError> {
    let Some(Value::Array(replacing)) = env.pointer("/server/auth/ingest_tokens") else {
        return Ok(());
    };
    let Some(Value::Array(entries)) = file.pointer("/server/auth/ingest_tokens") else {
        return Ok(());
    };
    let bound: Vec<String> = (entries.iter())
        .filter_map(|e| match e.get("instance") {
            Some(Value::String(i)) => Some(i.clone()),
            _ => None,
        })
        .collect();
    if bound.is_empty() {
        return Ok(());
    }
    Err(invalid(
        "server.auth.ingest_tokens",
        format!(
            "the environment variable HERALD__SERVER__AUTH__INGEST_TOKENS ({} token(s)) replaces this list of the \
             file, whose entries bind tokens to Argo CD instances ({}): those bindings would be lost. Keep each token \
             in its entry (`token_file:` naming a mounted Secret key, deploy/kubernetes/README.md \"Several Argo CD \
             instances\"), or set an entry's token alone (HERALD__SERVER__AUTH__INGEST_TOKENS__0__TOKEN), or remove \
             the variable",
            replacing.len(),
            bound.join(", ")
        ),
    ))
}

/// The file's content, read with `read`, refused when the file changed while it was read (its size or modification
/// time differ before and after, or the bytes read are not its size): a file being rewritten is read half-written,
/// and half a file can be a valid configuration without its credentials.
pub(super) fn read_whole(
    file: &Path,
    read: impl FnOnce(&Path) -> std::io::Result<Vec<u8>>,
) -> Result<Vec<u8>, ConfigError> {
    match read_stamped(file, read) {
        Ok((bytes, _)) => Ok(bytes),
        Err(Unread::Io(e)) => Err(ConfigError::Load(format!("{}: {e}", file.display()))),
        Err(Unread::Changed) => Err(ConfigError::Load(format!(
            "{}: the file changed while it was read; nothing was applied (write it whole, e.g. to a temporary file \
             renamed over it, then reload again)",
            file.display()
        ))),
    }
}

/// A file's size and modification time.
type Stamp = (u64, Option<std::time::SystemTime>);

/// Why a file was not read whole.
enum Unread {
    Io(std::io::Error),
    Changed,
}

/// [`read_whole`], with the file's [`Stamp`] as it was read.
fn read_stamped(file: &Path, read: impl FnOnce(&Path) -> std::io::Result<Vec<u8>>) -> Result<(Vec<u8>, Stamp), Unread> {
    let stamp = |m: std::fs::Metadata| (m.len(), m.modified().ok());
    let before = stamp(std::fs::metadata(file).map_err(Unread::Io)?);
    let bytes = read(file).map_err(Unread::Io)?;
    let after = stamp(std::fs::metadata(file).map_err(Unread::Io)?);
    if before != after || bytes.len() as u64 != after.0 {
        return Err(Unread::Changed);
    }
    Ok((bytes, after))
}

/// How long a secret file must have stayed the same before a reload takes it.
const SETTLED: Duration = Duration::from_secs(1);

/// How long a reload waits for a secret file that keeps changing before it refuses it.
const SETTLE_WITHIN: Duration = Duration::from_secs(5);

/// A `<secret>_file`'s content. Always read whole ([`read_stamped`]). On a reload (SIGHUP), while a writer may be at
/// work, it is taken only once it has stayed the same for [`SETTLED`]: one modified less than that ago is read again
/// when that has passed, and taken when both readings agree (bytes, size and time) or its modification is by then
/// old enough — a token being written (`echo -n … > file`, an editor saving in pieces) is not taken as its prefix,
/// which would then be a credential. One still changing after [`SETTLE_WITHIN`] refuses the reload. A Kubernetes
/// Secret's files change by an atomic swap of their directory and are never seen half-written.
fn read_secret(file: &Path, reading: Reading) -> Result<Vec<u8>, String> {
    let started = std::time::Instant::now();
    let mut before: Option<(Vec<u8>, Stamp)> = None;
    loop {
        let (bytes, stamp) = read_stamped(file, |p| std::fs::read(p)).map_err(|e| match e {
            Unread::Io(e) => format!("cannot read {file:?}: {}", e.kind()),
            Unread::Changed => format!("{file:?} changed while it was read; write it whole, then reload again"),
        })?;
        let age = (stamp.1).and_then(|m| std::time::SystemTime::now().duration_since(m).ok());
        let agreed = before.as_ref().is_some_and(|b| b.0 == bytes && b.1 == stamp);
        if reading == Reading::Start || agreed || age.is_some_and(|a| a >= SETTLED) {
            return Ok(bytes);
        }
        if started.elapsed() >= SETTLE_WITHIN {
            return Err(format!(
                "{file:?} kept changing for {}s (each reading differed); nothing was applied: write it whole (to a \
                 temporary file renamed over it), then reload again",
                SETTLE_WITHIN.as_secs()
            ));
        }
        let wait = SETTLED.saturating_sub(age.unwrap_or_default());
        std::thread::sleep(wait.max(Duration::from_millis(50)));
        before = Some((bytes, stamp));
    }
}

/// Splitting `tok1,` or an empty variable gives empty entries: they are no tokens, not empty tokens (which
/// validation refuses when written in the file).
fn drop_blank_tokens(env: &mut Value) {
    let Some(auth) = env.pointer_mut("/server/auth").and_then(Value::as_object_mut) else {
        return;
    };
    for key in TOKEN_LISTS {
        if let Some(Value::Array(list)) = auth.get_mut(key) {
            list.retain(|v| v.as_str().is_none_or(|s| !s.trim().is_empty()));
        }
    }
}

/// Merges `over` into `base`: objects key by key; an object whose keys are all numbers into a list, element by
/// element (so one environment variable can set one field of one receiver); anything else replaces.
pub(super) fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b @ (Value::Array(_) | Value::Null), Value::Object(o)) if !o.is_empty() && o.keys().all(|k| is_index(k)) => {
            if b.is_null() {
                *b = Value::Array(Vec::new());
            }
            let Value::Array(list) = b else { return };
            for (k, v) in o {
                let Ok(i) = k.parse::<usize>() else { continue };
                // An index far past the end would otherwise allocate without bound; a short gap is filled with
                // empty entries that validation then reports by their key path.
                if i > list.len() + 64 {
                    continue;
                }
                while list.len() <= i {
                    list.push(Value::Null);
                }
                merge(&mut list[i], v);
            }
        }
        (b @ Value::Null, Value::Object(o)) => {
            let mut map = Value::Object(Map::new());
            merge(&mut map, Value::Object(o));
            *b = map;
        }
        (b, o) => *b = o,
    }
}

fn is_index(k: &str) -> bool {
    !k.is_empty() && k.len() <= 4 && k.bytes().all(|c| c.is_ascii_digit())
}

/// Replaces every `<key>_file` (for the keys in [`FILE_KEYS`]) by `<key>` with the file's content, trailing newline
/// removed. A token list's file (`bearer_tokens_file`…) holds one token per line. Errors name the key path and the file, never the content.
pub(super) fn resolve_files(value: &mut Value, path: &str, reading: Reading, errors: &mut Vec<ConfigError>) {
    match value {
        Value::Object(map) => {
            resolve_object(map, path, reading, errors);
            for (k, v) in map.iter_mut() {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                resolve_files(v, &child, reading, errors);
            }
        }
        Value::Array(list) => {
            for (i, v) in list.iter_mut().enumerate() {
                resolve_files(v, &format!("{path}[{i}]"), reading, errors);
            }
        }
        _ => {}
    }
}

fn resolve_object(map: &mut Map<String, Value>, path: &str, reading: Reading, errors: &mut Vec<ConfigError>) {
    for key in FILE_KEYS {
        let file_key = format!("{key}_file");
        let Some(file) = map.remove(&file_key) else {
            continue;
        };
        let at = if path.is_empty() {
            file_key.clone()
        } else {
            format!("{path}.{file_key}")
        };
        let Value::String(file) = file else {
            errors.push(invalid(at, "must be the path of a file"));
            continue;
        };
        if map.get(key).is_some_and(|v| !v.is_null()) {
            errors.push(invalid(at, format!("set either `{key}` or `{file_key}`, not both")));
            continue;
        }
        let read = read_secret(Path::new(&file), reading)
            .and_then(|bytes| String::from_utf8(bytes).map_err(|_| format!("{file:?} is not UTF-8 text")));
        match read {
            Ok(text) => {
                let text = text.trim_end_matches(['\n', '\r']);
                let v = if TOKEN_LISTS.contains(&key) {
                    Value::Array(
                        text.lines()
                            .map(str::trim)
                            .filter(|l| !l.is_empty())
                            .map(|l| Value::String(l.to_string()))
                            .collect(),
                    )
                } else {
                    Value::String(text.to_string())
                };
                map.insert(key.to_string(), v);
            }
            Err(why) => errors.push(invalid(at, why)),
        }
    }
}

/// One `HERALD__…` variable of the environment: its name and the key path it sets (`["routes", "0", "receivers"]`).
pub(super) struct EnvironmentKey {
    pub(super) name: String,
    path: Vec<String>,
}

/// The `HERALD__…` variables set now, as [`read`] merges them (keys lowercased, `__` between levels).
pub(super) fn environment_keys() -> Vec<EnvironmentKey> {
    std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter_map(|name| {
            let rest = name.strip_prefix("HERALD__")?.to_ascii_lowercase();
            let path = rest.split("__").map(str::to_string).collect();
            Some(EnvironmentKey { name, path })
        })
        .collect()
}

/// `e` with each error whose key was set (or made wrong) by an environment variable saying which variable: a bad
/// `HERALD__ROUTES__0__RECEIVERS` is not in any file the operator can look at. `value` is what was read, to find
/// a receiver named in a path (`receivers["team-jira"]`) by its index.
pub(super) fn blame_environment(e: ConfigError, variables: &[EnvironmentKey], value: &Value) -> ConfigError {
    match e {
        ConfigError::Many(list) => ConfigError::Many(
            list.into_iter()
                .map(|e| blame_environment(e, variables, value))
                .collect(),
        ),
        ConfigError::Invalid { path, message } => {
            let at = segments(&path, value);
            let names: Vec<&str> = variables
                .iter()
                .filter(|v| {
                    // The variable sets this key or one above it; or the error is reported at a key above the
                    // variable's and names the variable's own key (`unknown field `colour``).
                    at.starts_with(&v.path)
                        || (v.path.starts_with(&at) && message.contains(&format!("`{}`", v.path[at.len()])))
                })
                .map(|v| v.name.as_str())
                .collect();
            let message = match names.as_slice() {
                [] => message,
                [one] => format!("{message} (set by the environment variable {one})"),
                many => format!("{message} (set by the environment variables {})", many.join(", ")),
            };
            ConfigError::Invalid { path, message }
        }
        other => other,
    }
}

/// An error's key path as the environment writes it: `receivers["team-jira"].jira.token` → `receivers`, `3`,
/// `jira`, `token` (the receiver's index in `value`), `routes[0].receivers[1]` → `routes`, `0`, `receivers`, `1`.
fn segments(path: &str, value: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("[\"") {
            let Some((name, tail)) = after.split_once("\"]") else {
                break;
            };
            let index = (value[out.last().map_or("", String::as_str)].as_array())
                .and_then(|list| list.iter().position(|r| r["name"].as_str() == Some(name)));
            out.push(index.map_or_else(|| name.to_string(), |i| i.to_string()));
            rest = tail;
        } else if let Some(after) = rest.strip_prefix('[') {
            let Some((index, tail)) = after.split_once(']') else {
                break;
            };
            out.push(index.to_string());
            rest = tail;
        } else {
            let rest_of = rest.strip_prefix('.').unwrap_or(rest);
            let end = rest_of.find(['.', '[']).unwrap_or(rest_of.len());
            out.push(rest_of[..end].to_string());
            rest = &rest_of[end..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_environment_index_sets_one_field_of_one_list_element() {
        let mut base = json!({"receivers": [{"name": "a", "console": {}}, {"name": "b", "slack": {"channel": "#x"}}]});
        merge(
            &mut base,
            json!({"receivers": {"1": {"slack": {"token": "xoxb-1"}}}, "server": {"listen": "0.0.0.0:1"}}),
        );
        assert_eq!(
            base,
            json!({"receivers": [{"name": "a", "console": {}}, {"name": "b", "slack": {"channel": "#x", "token": "xoxb-1"}}],
                   "server": {"listen": "0.0.0.0:1"}})
        );
        let mut empty = Value::Null;
        merge(&mut empty, json!({"receivers": {"0": {"name": "c"}}}));
        assert_eq!(empty, json!({"receivers": [{"name": "c"}]}));
        let mut far = json!({"receivers": []});
        merge(&mut far, json!({"receivers": {"9999": {"name": "c"}}}));
        assert_eq!(far, json!({"receivers": []}), "a far index is ignored, not allocated");
    }

    #[test]
    fn an_environment_list_may_not_drop_the_files_instance_bindings() {
        let file = json!({"server": {"auth": {"ingest_tokens": [
            {"name": "eu", "token": "eu-token-0123456789", "instance": "eu"},
            {"name": "us", "token": "us-token-0123456789", "instance": "us"}]}}});
        let whole = json!({"server": {"auth": {"ingest_tokens": ["new-token-0123456789"]}}});
        let e = keeps_instance_bindings(&file, &whole).expect_err("dropped").to_string();
        assert!(
            e.starts_with("server.auth.ingest_tokens: the environment variable HERALD__SERVER__AUTH__INGEST_TOKENS"),
            "{e}"
        );
        assert!(e.contains("(eu, us)") && e.contains("token_file"), "{e}");
        assert!(
            !e.contains("new-token") && !e.contains("eu-token"),
            "no secret in the error: {e}"
        );
        // One entry's token from the environment merges into the entry: its binding stays.
        let one = json!({"server": {"auth": {"ingest_tokens": {"0": {"token": "new-token-0123456789"}}}}});
        assert!(keeps_instance_bindings(&file, &one).is_ok());
        // A file without bindings (or without the list) may be replaced, as always.
        let plain = json!({"server": {"auth": {"ingest_tokens": ["old-token-0123456789"]}}});
        assert!(keeps_instance_bindings(&plain, &whole).is_ok());
        assert!(keeps_instance_bindings(&json!({}), &whole).is_ok());
        // Hostile shapes in the file: no binding read from them, nothing refused for them.
        let odd = json!({"server": {"auth": {"ingest_tokens": [{"instance": 7}, "t", null, {"instance": null}]}}});
        assert!(keeps_instance_bindings(&odd, &whole).is_ok());
    }

    #[test]
    fn a_file_that_changes_while_it_is_read_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let f = dir.path().join("herald.yaml");
        std::fs::write(&f, "server: {listen: '127.0.0.1:8080'}\n").expect("write");
        assert!(read_whole(&f, |p| std::fs::read(p)).is_ok());
        // The writer adds its credentials while Herald reads what is there so far.
        let err = read_whole(&f, |p| {
            let partial = std::fs::read(p);
            std::fs::write(
                p,
                "server: {listen: '127.0.0.1:8080', auth: {bearer_tokens: [a-token-0123456789]}}\n",
            )?;
            partial
        })
        .expect_err("changed while read");
        assert!(err.to_string().contains("changed while it was read"), "{err}");
        let err = read_whole(&f, |p| std::fs::read(p).map(|b| b[..5].to_vec())).expect_err("short read");
        assert!(err.to_string().contains("changed while it was read"), "{err}");
    }

    #[test]
    fn a_reload_takes_a_secret_file_once_it_has_stopped_changing() {
        let dir = tempfile::tempdir().expect("dir");
        let f = dir.path().join("token");
        std::fs::write(&f, "rotated-token-abc").expect("write");
        let writer = {
            let f = f.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                std::fs::write(&f, "rotated-token-abcdefghijklmnop\n").expect("rest");
            })
        };
        assert_eq!(
            read_secret(&f, Reading::Start).expect("read"),
            b"rotated-token-abc",
            "at start, as it is"
        );
        let read = read_secret(&f, Reading::Reload).expect("settled");
        writer.join().expect("writer");
        assert_eq!(
            read, b"rotated-token-abcdefghijklmnop\n",
            "the whole token, never its prefix"
        );
    }

    #[test]
    fn a_secret_file_that_keeps_changing_refuses_the_reload() {
        let dir = tempfile::tempdir().expect("dir");
        let f = dir.path().join("token");
        std::fs::write(&f, "secret-value-0").expect("write");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (f, stop) = (f.clone(), stop.clone());
            std::thread::spawn(move || {
                for i in 1.. {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                    std::fs::write(&f, format!("secret-value-{i}")).expect("write");
                }
            })
        };
        let e = read_secret(&f, Reading::Reload).expect_err("never settled");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().expect("writer");
        assert!(e.contains("kept changing"), "{e}");
        assert!(!e.contains("secret-value"), "the content is never shown: {e}");
    }

    #[test]
    fn a_secret_file_replaces_its_key_and_errors_name_the_path() {
        let dir = tempfile::tempdir().expect("dir");
        let token = dir.path().join("token");
        std::fs::write(&token, "xoxb-secret\n").expect("write");
        let tokens = dir.path().join("tokens");
        std::fs::write(&tokens, "one-token-of-sixteen\n\n two-token-of-sixteen \n").expect("write");
        let mut v = json!({
            "receivers": [{"name": "s", "slack": {"token_file": token, "channel": "#c"}}],
            "server": {"auth": {"bearer_tokens_file": tokens}},
            "smtp": {"ca_file": "/etc/ssl/ca.pem"},
        });
        let mut errors = Vec::new();
        resolve_files(&mut v, "", Reading::Start, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(v["receivers"][0]["slack"]["token"], "xoxb-secret");
        assert_eq!(v["receivers"][0]["slack"].get("token_file"), None);
        assert_eq!(
            v["server"]["auth"]["bearer_tokens"],
            json!(["one-token-of-sixteen", "two-token-of-sixteen"])
        );
        assert_eq!(
            v["smtp"]["ca_file"], "/etc/ssl/ca.pem",
            "ca_file is a path, not a secret"
        );

        let mut bad = json!({"receivers": [{"name": "s", "slack": {"token": "a", "token_file": token}},
                                           {"name": "t", "pagerduty": {"routing_key_file": "/nonexistent/key"}}]});
        let mut errors = Vec::new();
        resolve_files(&mut bad, "", Reading::Start, &mut errors);
        let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(
            text[0].starts_with("receivers[0].slack.token_file: set either"),
            "{text:?}"
        );
        assert!(
            text[1].starts_with("receivers[1].pagerduty.routing_key_file: cannot read"),
            "{text:?}"
        );
    }
}
