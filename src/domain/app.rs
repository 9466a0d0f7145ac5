//! An Application's identity across Argo CD instances ([`AppId`]) and the name of the instance everything stored
//! before instances existed belongs to ([`DEFAULT_INSTANCE`]). Every stage names Applications this way; `argocd`
//! reads them from what Argo CD sends.

use serde::{Deserialize, Serialize};

/// The Argo CD instance of an Application when only one is configured, and of everything stored before instances
/// existed (`argocd.url` / `argocd.api` describe it).
pub const DEFAULT_INSTANCE: &str = "default";

/// An Application's identity: the Argo CD instance that holds it (`argocd.instances[].name`, or
/// [`DEFAULT_INSTANCE`]), and its namespace and name there. Two instances may each hold an `argocd/payments-api`:
/// they are two Applications.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AppId {
    /// Stored snapshots and held drops written before instances existed have none: they are the default's.
    #[serde(default = "default_instance")]
    pub instance: String,
    pub namespace: String,
    pub name: String,
}

/// What a stored incident or change written before instances existed is: the default instance's.
pub fn default_instance() -> String {
    DEFAULT_INSTANCE.to_string()
}

/// Whether `instance` is the default one (then left out of what Herald sends, as before instances existed). An
/// empty name (a value built in code with `Default`) counts as the default.
pub fn is_default_instance(instance: &str) -> bool {
    instance.is_empty() || instance == DEFAULT_INSTANCE
}

impl AppId {
    /// An Application of the default instance.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self::of(DEFAULT_INSTANCE, namespace, name)
    }

    pub fn of(instance: impl Into<String>, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            instance: instance.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// What [`Display`](std::fmt::Display) writes, read back: `namespace/name` or `instance/namespace/name`.
    pub fn parse_path(text: &str) -> Option<Self> {
        let parts: Vec<&str> = text.split('/').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return None;
        }
        match parts.as_slice() {
            [namespace, name] => Some(Self::new(*namespace, *name)),
            [instance, namespace, name] => Some(Self::of(*instance, *namespace, *name)),
            _ => None,
        }
    }

    /// An empty instance (a value built in code with `Default`) counts as the default.
    pub fn is_default_instance(&self) -> bool {
        is_default_instance(&self.instance)
    }
}

/// `namespace/name`, or `instance/namespace/name` outside the default instance (the API's path for it).
impl std::fmt::Display for AppId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.is_default_instance() {
            write!(f, "{}/", self.instance)?;
        }
        write!(f, "{}/{}", self.namespace, self.name)
    }
}
