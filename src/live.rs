//! [`Live`]: the current value of something `herald serve` replaces on SIGHUP (the pipeline's settings, the
//! receivers, the credentials). A reader takes the value it needs for one operation and keeps it to the end, so a
//! reload never changes the settings in the middle of an ingest or a delivery; the next operation sees the new ones.

use std::sync::{Arc, RwLock};

pub struct Live<T>(RwLock<Arc<T>>);

impl<T> Live<T> {
    pub fn new(value: T) -> Self {
        Self(RwLock::new(Arc::new(value)))
    }

    /// The current value (a clone of its `Arc`: the lock is held for that copy only).
    pub fn get(&self) -> Arc<T> {
        // A writer cannot panic between taking the lock and storing the new Arc, so a poisoned lock holds a whole
        // value: use it.
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Makes `value` the current value; readers holding the old one finish with it.
    pub fn replace(&self, value: T) {
        let value = Arc::new(value);
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_keeps_what_it_took_and_the_next_read_sees_the_new_value() {
        let live = Live::new("old");
        let taken = live.get();
        live.replace("new");
        assert_eq!(*taken, "old");
        assert_eq!(*live.get(), "new");
    }
}
