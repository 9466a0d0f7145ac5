//! PLACEHOLDER: being written in a helper branch.

use crate::configuration::WebhookUrlSettings;
use crate::notify::Notification;
use super::{Delivered, DeliveryError, Memo, Receiver};

pub struct Teams;
pub struct GoogleChat;
pub struct Mattermost;

impl Teams {
    pub fn new(_s: WebhookUrlSettings, _h: reqwest::Client) -> Self { Self }
}
impl GoogleChat {
    pub fn new(_s: WebhookUrlSettings, _h: reqwest::Client, _t: Option<String>) -> Self { Self }
}
impl Mattermost {
    pub fn new(_s: WebhookUrlSettings, _h: reqwest::Client, _t: Option<String>) -> Self { Self }
}

#[async_trait::async_trait]
impl Receiver for Teams {
    async fn deliver(&self, _n: &Notification, _m: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        Err(DeliveryError::permanent("this receiver is not built yet"))
    }
}
#[async_trait::async_trait]
impl Receiver for GoogleChat {
    async fn deliver(&self, _n: &Notification, _m: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        Err(DeliveryError::permanent("this receiver is not built yet"))
    }
}
#[async_trait::async_trait]
impl Receiver for Mattermost {
    async fn deliver(&self, _n: &Notification, _m: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        Err(DeliveryError::permanent("this receiver is not built yet"))
    }
}
