//! PLACEHOLDER: being written in a helper branch.

use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::configuration::{EmailSettings, SmtpSettings};
use crate::notify::Notification;

pub struct Email;

impl Email {
    pub fn new(
        _s: EmailSettings,
        _smtp: Option<SmtpSettings>,
        _t: Option<String>,
    ) -> Result<Self, String> {
        Ok(Self)
    }
}

#[async_trait::async_trait]
impl Receiver for Email {
    async fn deliver(
        &self,
        _n: &Notification,
        _m: Option<&Memo>,
    ) -> Result<Delivered, DeliveryError> {
        Err(DeliveryError::permanent("this receiver is not built yet"))
    }
}
