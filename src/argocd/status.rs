//! Argo CD's status vocabulary as types: an Application's (and a resource's) sync status and health status, a sync
//! operation's (and a hook's) phase, a resource's result in the last sync. Parsed once where a body or an API answer is read; a value Argo CD may add later is kept as `Other`, never
//! refused. Stored and sent as Argo CD's own strings (`as_str`), so what is stored and what content hashes cover
//! stay what they were.

/// An enum of Argo CD's known values plus `Other(String)`, with `ALL` (the known ones, in Argo CD's order),
/// `as_str`, `From<&str>`/`From<String>`, `Display`, and serde as the plain string.
macro_rules! vocabulary {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($variant,)+
            /// A value this version of Herald does not know (kept as Argo CD sent it).
            Other(String),
        }

        impl $name {
            /// The known values, in Argo CD's order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)+
                    $name::Other(s) => s,
                }
            }

            /// The known value written exactly so (`OutOfSync`, not `outofsync`).
            pub fn known(text: &str) -> Option<Self> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// The text of a value this version does not know, to bound or clear it where a body is read (a known
            /// value is Argo CD's own short word and needs neither).
            pub fn other_mut(&mut self) -> Option<&mut String> {
                match self {
                    $name::Other(s) => Some(s),
                    _ => None,
                }
            }

            /// The known values' names, for error messages.
            pub fn list() -> String {
                Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                Self::known(text).unwrap_or_else(|| $name::Other(text.to_string()))
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> Self {
                Self::known(&text).unwrap_or($name::Other(text))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d).map(Self::from)
            }
        }
    };
}

vocabulary!(
    /// `status.sync.status`.
    SyncStatus {
        Synced => "Synced",
        OutOfSync => "OutOfSync",
        Unknown => "Unknown",
    }
);

vocabulary!(
    /// `status.health.status`.
    HealthStatus {
        Healthy => "Healthy",
        Progressing => "Progressing",
        Degraded => "Degraded",
        Suspended => "Suspended",
        Missing => "Missing",
        Unknown => "Unknown",
    }
);

vocabulary!(
    /// `status.operationState.phase`.
    OperationPhase {
        Running => "Running",
        Terminating => "Terminating",
        Failed => "Failed",
        Error => "Error",
        Succeeded => "Succeeded",
    }
);

vocabulary!(
    /// `operationState.syncResult.resources[].status`: what the last sync did with one resource.
    ResultCode {
        Synced => "Synced",
        SyncFailed => "SyncFailed",
        Pruned => "Pruned",
        PruneSkipped => "PruneSkipped",
    }
);

// The enums come from one macro: a derived default would need a marker on one variant of each.
/// Argo CD's own default: not known yet.
#[allow(clippy::derivable_impls)]
impl Default for SyncStatus {
    fn default() -> Self {
        SyncStatus::Unknown
    }
}

#[allow(clippy::derivable_impls)]
impl Default for HealthStatus {
    fn default() -> Self {
        HealthStatus::Unknown
    }
}

/// An operation whose phase was not sent.
impl Default for OperationPhase {
    fn default() -> Self {
        OperationPhase::Other(String::new())
    }
}

/// A result whose status was not sent.
impl Default for ResultCode {
    fn default() -> Self {
        ResultCode::Other(String::new())
    }
}

impl OperationPhase {
    /// The operation ended without doing what it was asked.
    pub fn failed(&self) -> bool {
        matches!(self, OperationPhase::Failed | OperationPhase::Error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_round_trip_and_others_are_kept() {
        for v in SyncStatus::ALL {
            assert_eq!(&SyncStatus::from(v.as_str()), v);
            let json = serde_json::to_string(v).expect("json");
            assert_eq!(json, format!("\"{}\"", v.as_str()));
            assert_eq!(&serde_json::from_str::<SyncStatus>(&json).expect("back"), v);
        }
        for v in HealthStatus::ALL {
            assert_eq!(&HealthStatus::from(v.as_str()), v);
        }
        for v in OperationPhase::ALL {
            assert_eq!(&OperationPhase::from(v.as_str()), v);
        }
        assert_eq!(HealthStatus::from("Flapping"), HealthStatus::Other("Flapping".into()));
        assert_eq!(HealthStatus::from("Flapping").as_str(), "Flapping");
        assert_eq!(SyncStatus::known("outofsync"), None, "Argo CD's spelling only");
        assert_eq!(SyncStatus::list(), "Synced, OutOfSync, Unknown");
        assert!(OperationPhase::Error.failed() && !OperationPhase::Succeeded.failed());
    }

    #[test]
    fn a_result_code_argo_cd_adds_later_is_kept_and_written_back_as_sent() {
        for v in ResultCode::ALL {
            assert_eq!(&ResultCode::from(v.as_str()), v);
            assert_eq!(serde_json::to_string(v).expect("json"), format!("\"{}\"", v.as_str()));
        }
        let later: ResultCode = serde_json::from_str("\"PruneDeferred\"").expect("any string is read");
        assert_eq!(later, ResultCode::Other("PruneDeferred".into()));
        assert_eq!(serde_json::to_string(&later).expect("json"), "\"PruneDeferred\"");
        assert_eq!(ResultCode::default().as_str(), "", "none sent is written as none");
        assert_eq!(ResultCode::list(), "Synced, SyncFailed, Pruned, PruneSkipped");
    }

    #[test]
    fn only_an_unknown_word_can_be_changed_in_place() {
        let mut known = HealthStatus::Degraded;
        assert!(known.other_mut().is_none());
        let mut unknown = HealthStatus::from("Flapping");
        if let Some(text) = unknown.other_mut() {
            text.push_str(" fast");
        }
        assert_eq!(unknown.as_str(), "Flapping fast");
    }
}
