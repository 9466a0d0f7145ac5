//! An Application's history, as its page shows it: every transition and every delivery about it, merged newest
//! first, a page at a time. A page ends at a [`HistoryCursor`] (the `?before=` of its "older" link), which orders
//! rows of both tables by time, then source (a delivery after the transition at the same instant), then row id.

use chrono::{DateTime, Utc};

use super::{Pipeline, PipelineError};
use crate::argocd::AppId;
use crate::clock::{from_millis, to_millis};
use crate::store::{AboutDelivery, EscalationRecord, HistoryBound, TimelineEntry};

/// One line of an Application's history.
#[derive(Debug, Clone)]
pub enum HistoryItem {
    Transition(TimelineEntry),
    /// A delivery about one of its incidents: who was told what, when.
    Delivery(Box<AboutDelivery>),
}

impl HistoryItem {
    pub fn at(&self) -> DateTime<Utc> {
        match self {
            HistoryItem::Transition(t) => t.at,
            HistoryItem::Delivery(d) => d.queued_at,
        }
    }
}

/// A page of history, newest first, and where the next (older) page starts, when there is one.
#[derive(Debug, Clone)]
pub struct HistoryPage {
    pub items: Vec<HistoryItem>,
    pub older: Option<HistoryCursor>,
}

/// Where a page of history ended: the last row's time, source and id. Written as `{millis}.{source}.{id}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct HistoryCursor {
    at: i64,
    source: u8,
    id: i64,
}

const TRANSITION: u8 = 0;
const DELIVERY: u8 = 1;

impl HistoryCursor {
    pub fn encode(&self) -> String {
        format!("{}.{}.{}", self.at, self.source, self.id)
    }

    /// A cursor as [`HistoryCursor::encode`] wrote it; anything else is `None`.
    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.split('.');
        let number = |p: Option<&str>| {
            p.filter(|p| !p.is_empty() && p.len() <= 19 && p.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|p| p.parse::<i64>().ok())
        };
        let at = number(parts.next())?;
        let source = match parts.next()? {
            "0" => TRANSITION,
            "1" => DELIVERY,
            _ => return None,
        };
        let id = number(parts.next())?;
        parts.next().is_none().then_some(HistoryCursor { at, source, id })
    }

    fn of(item: &HistoryItem, id: i64) -> Self {
        let source = match item {
            HistoryItem::Transition(_) => TRANSITION,
            HistoryItem::Delivery(_) => DELIVERY,
        };
        HistoryCursor {
            at: to_millis(item.at()),
            source,
            id,
        }
    }

    /// The same position in the terms of one table (`source`): its rows strictly after it in the page's order.
    fn bound(cursor: Option<&HistoryCursor>, source: u8) -> HistoryBound {
        match cursor {
            None => HistoryBound::NONE,
            Some(c) if source < c.source => HistoryBound { at: c.at, id: i64::MAX },
            Some(c) if source == c.source => HistoryBound { at: c.at, id: c.id },
            Some(c) => HistoryBound { at: c.at, id: i64::MIN },
        }
    }

    /// When the page ending here ends (for the page's words).
    pub fn at(&self) -> DateTime<Utc> {
        from_millis(self.at)
    }
}

impl Pipeline {
    /// A page of an Application's history before `before` (from the newest without one): at most `limit` lines.
    pub async fn history(
        &self,
        app: &AppId,
        before: Option<&HistoryCursor>,
        limit: i64,
    ) -> Result<HistoryPage, PipelineError> {
        let store = &self.core().store;
        let transitions = store
            .timeline_before(app, HistoryCursor::bound(before, TRANSITION), limit + 1)
            .await?;
        let deliveries = store
            .app_deliveries(app, HistoryCursor::bound(before, DELIVERY), limit + 1)
            .await?;
        let mut all: Vec<(HistoryCursor, HistoryItem)> = transitions
            .into_iter()
            .map(|(id, t)| {
                let item = HistoryItem::Transition(t);
                (HistoryCursor::of(&item, id), item)
            })
            .chain(deliveries.into_iter().map(|d| {
                let id = d.delivery.id;
                let item = HistoryItem::Delivery(Box::new(d));
                (HistoryCursor::of(&item, id), item)
            }))
            .collect();
        all.sort_by_key(|(cursor, _)| std::cmp::Reverse(*cursor));
        let more = all.len() as i64 > limit;
        all.truncate(limit.max(0) as usize);
        let older = more.then(|| all.last().map(|(c, _)| *c)).flatten();
        Ok(HistoryPage {
            items: all.into_iter().map(|(_, i)| i).collect(),
            older,
        })
    }

    /// The newest `limit` deliveries about any of `incidents`, newest first.
    pub async fn told(&self, incidents: &[i64], limit: i64) -> Result<Vec<AboutDelivery>, PipelineError> {
        Ok(self.core().store.incident_deliveries(incidents, limit).await?)
    }

    /// The incident's next escalation step not yet sent, and when it is due.
    pub async fn next_escalation(
        &self,
        incident: i64,
    ) -> Result<Option<(EscalationRecord, DateTime<Utc>)>, PipelineError> {
        Ok(self.core().store.next_escalation(incident).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_what_it_wrote_and_nothing_else() {
        let c = HistoryCursor {
            at: 1_767_261_600_000,
            source: DELIVERY,
            id: 42,
        };
        assert_eq!(HistoryCursor::decode(&c.encode()), Some(c));
        for bad in [
            "",
            "1",
            "1.1",
            "1.2.3",
            "1.1.3.4",
            "-1.1.3",
            "a.1.3",
            "1.1.",
            ".1.1",
            "1.1.+3",
            "99999999999999999999.1.1",
            "1 .1.1",
        ] {
            assert_eq!(HistoryCursor::decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn each_table_resumes_strictly_after_the_cursor_in_the_merged_order() {
        let c = HistoryCursor {
            at: 1000,
            source: DELIVERY,
            id: 7,
        };
        // Transitions at the same instant come after a delivery: all of them at 1000 are still to come.
        assert_eq!(
            HistoryCursor::bound(Some(&c), TRANSITION),
            HistoryBound { at: 1000, id: i64::MAX }
        );
        assert_eq!(
            HistoryCursor::bound(Some(&c), DELIVERY),
            HistoryBound { at: 1000, id: 7 }
        );
        let t = HistoryCursor {
            source: TRANSITION,
            ..c
        };
        assert_eq!(
            HistoryCursor::bound(Some(&t), DELIVERY),
            HistoryBound { at: 1000, id: i64::MIN }
        );
    }
}
