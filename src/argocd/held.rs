//! The items of an Argo CD listing held until the listing has ended. A listing that is refused — larger than
//! `argocd.api.max_listing_bytes`, cut, malformed, one page of a longer one — must store nothing, yet its items are
//! cut out as they arrive, before the verdict. So each item is written here, in the listing's order: one whose bytes
//! are known as its Application's stored state as that Application's key (16 bytes), any other as its bytes,
//! zstd-compressed as they come (Argo CD's JSON compresses tenfold or more; the captured bodies of tests/fixtures
//! 23-fold): holding a listing costs a tenth or less of its changed items' bytes, never more than
//! `max_listing_bytes`. Nothing is parsed into a `Snapshot` until the listing is known complete; then the items are
//! handed on one at a time.

use std::io::{self, Read, Write};

/// One held item.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum HeldItem {
    /// Bytes the caller's memory knows as what is stored: the caller's key of the Application.
    Unchanged(u128),
    /// An item to parse: the key of its bytes, how deep it sits in the listing, its bytes.
    Item { key: u128, depth: u32, bytes: Vec<u8> },
}

const UNCHANGED: u8 = 0;
const ITEM: u8 = 1;

/// The compression level: fast, since it runs while the listing arrives.
const LEVEL: i32 = 1;

pub(super) struct HeldItems {
    encoder: zstd::stream::write::Encoder<'static, Vec<u8>>,
}

impl HeldItems {
    pub(super) fn new() -> io::Result<Self> {
        Ok(Self {
            encoder: zstd::stream::write::Encoder::new(Vec::new(), LEVEL)?,
        })
    }

    pub(super) fn hold(&mut self, item: &HeldItem) -> io::Result<()> {
        match item {
            HeldItem::Unchanged(app) => {
                self.encoder.write_all(&[UNCHANGED])?;
                self.encoder.write_all(&app.to_le_bytes())
            }
            HeldItem::Item { key, depth, bytes } => {
                let len = u32::try_from(bytes.len()).map_err(|_| io::Error::other("an item over 4 GiB"))?;
                self.encoder.write_all(&[ITEM])?;
                self.encoder.write_all(&key.to_le_bytes())?;
                self.encoder.write_all(&depth.to_le_bytes())?;
                self.encoder.write_all(&len.to_le_bytes())?;
                self.encoder.write_all(bytes)
            }
        }
    }

    /// The items in the order they were held, each handed to `each` (which answers false to stop).
    pub(super) fn replay(self, each: &mut dyn FnMut(HeldItem) -> bool) -> io::Result<()> {
        let compressed = self.encoder.finish()?;
        let mut reader = zstd::stream::read::Decoder::new(&compressed[..])?;
        loop {
            let mut tag = [0u8; 1];
            match reader.read_exact(&mut tag) {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                r => r?,
            }
            let item = match tag[0] {
                UNCHANGED => HeldItem::Unchanged(u128::from_le_bytes(array(&mut reader)?)),
                _ => {
                    let key = u128::from_le_bytes(array(&mut reader)?);
                    let depth = u32::from_le_bytes(array(&mut reader)?);
                    let len = u32::from_le_bytes(array(&mut reader)?) as usize;
                    let mut bytes = vec![0u8; len];
                    reader.read_exact(&mut bytes)?;
                    HeldItem::Item { key, depth, bytes }
                }
            };
            if !each(item) {
                return Ok(());
            }
        }
    }
}

fn array<const N: usize>(reader: &mut impl Read) -> io::Result<[u8; N]> {
    let mut a = [0u8; N];
    reader.read_exact(&mut a)?;
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_items_come_back_in_order_and_cost_a_fraction_of_their_bytes() {
        let item = |i: u32| HeldItem::Item {
            key: u128::from(i) << 64,
            depth: 2,
            bytes: format!(
                r#"{{"metadata":{{"name":"app-{i}","namespace":"argocd"}},"status":{{"sync":{{"status":"Synced"}}}}}}"#
            )
            .into_bytes(),
        };
        let mut held = HeldItems::new().expect("encoder");
        let mut raw = 0;
        for i in 0..2000 {
            let it = if i % 3 == 0 {
                HeldItem::Unchanged(u128::from(i))
            } else {
                item(i)
            };
            if let HeldItem::Item { bytes, .. } = &it {
                raw += bytes.len();
            }
            held.hold(&it).expect("hold");
        }
        held.encoder.flush().expect("flush");
        let size = held.encoder.get_ref().len();
        assert!(size * 5 < raw, "{size} bytes held for {raw}");
        let mut back = Vec::new();
        held.replay(&mut |it| {
            back.push(it);
            true
        })
        .expect("replay");
        assert_eq!(back.len(), 2000);
        assert_eq!(back[0], HeldItem::Unchanged(0));
        assert_eq!(back[1], item(1));
        assert_eq!(back[1999], item(1999));
    }
}
