//! Fuzzes the Argo CD body parser: any bytes must give a snapshot or a clear error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match herald::argocd::parse_body(data, 128) {
        Ok(snap) => {
            assert!(!snap.app.name.is_empty());
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
        }
    }
});
