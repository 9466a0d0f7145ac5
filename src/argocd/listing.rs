//! The listing's framing: a listing (`{"metadata": {…}, "items": [Application, …]}`) cut into its items' bytes as
//! the answer arrives, chunk by chunk, without building anything of what it skips.
//!
//! A listing of 50,000 Applications is about 480 MB. Reading it through `serde_json` from an `io::Read` into a
//! `Value` per item cost more than everything else a resync does; here a small scanner finds where each item begins
//! and ends (it follows strings, escapes and brackets, nothing more), and each item's bytes are then read by the
//! webhook body's parser (`argocd::parse_body`, the typed reader with the tolerant one behind it). Nothing is taken
//! on the scanner's word alone: every byte is still read by `serde_json` — an item by the parser, `metadata` into
//! what it says, any other top-level value checked as JSON and dropped — so a malformed listing is refused as
//! before. Memory holds the item being read and the chunk it is in, whatever the listing's size.

use serde::Deserialize;
use serde::de::IgnoredAny;

/// What the top-level object said: how many items (`None`: no `items` array, or `null`) and its `continue` token.
#[derive(Debug, Default)]
pub(super) struct Seen {
    pub items: Option<usize>,
    pub continue_token: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the top-level `{`.
    Start,
    /// A key, or the `}` of an empty object (`first`), is next.
    Key { first: bool },
    /// The value of the key just read.
    Value { items: bool },
    /// Inside `items`: an item, or the `]` of an empty array (`first`), is next.
    Item { first: bool },
    /// After an item: `,` or `]`.
    AfterItem,
    /// After a top-level value: `,` or `}`.
    AfterValue,
    /// After the top-level `}`: only whitespace may follow.
    Done,
}

/// Where one JSON value ends, found across chunks: resumable at `at`.
#[derive(Debug, Clone, Copy)]
struct Extent {
    at: usize,
    depth: u32,
    /// The deepest nesting met so far (an item deeper than the parser allows is refused without parsing it).
    deepest: u32,
    in_string: bool,
    escaped: bool,
}

pub(super) struct Scanner {
    buf: Vec<u8>,
    /// Everything before `pos` is read.
    pos: usize,
    state: State,
    /// The key whose value is being read (`metadata`, or another to check and skip).
    key: Vec<u8>,
    /// The value being measured, when one has begun.
    extent: Option<Extent>,
    seen: Seen,
    items_key: bool,
}

/// Why the framing failed: the text is not a listing object (a JSON error, in words).
pub(super) type Malformed = String;

/// What is done with each item: its bytes and its depth of nesting; false to stop.
pub(super) type OnItem<'a> = dyn FnMut(&[u8], u32) -> Result<bool, Malformed> + 'a;

impl Scanner {
    pub(super) fn new() -> Self {
        Self {
            buf: Vec::new(),
            pos: 0,
            state: State::Start,
            key: Vec::new(),
            extent: None,
            seen: Seen::default(),
            items_key: false,
        }
    }

    /// Reads `chunk`, handing each complete item's bytes and how deep it nests to `item` (which answers false to
    /// stop: `Ok(false)` here).
    pub(super) fn feed(&mut self, chunk: &[u8], item: &mut OnItem) -> Result<bool, Malformed> {
        // What is read is dropped before the buffer grows: it holds the value being read and one chunk.
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            if let Some(e) = &mut self.extent {
                e.at -= self.pos;
            }
            self.pos = 0;
        }
        self.buf.extend_from_slice(chunk);
        self.run(item)
    }

    /// The listing ended: what it said, if it was a complete listing object.
    pub(super) fn finish(self) -> Result<Seen, Malformed> {
        if self.state != State::Done {
            return Err(
                if self.state == State::Start && self.buf[self.pos..].iter().all(u8::is_ascii_whitespace) {
                    "EOF while parsing a value: the listing is empty".into()
                } else {
                    "EOF while parsing the listing: it was cut".into()
                },
            );
        }
        Ok(self.seen)
    }

    fn skip_whitespace(&mut self) -> Option<u8> {
        while let Some(&b) = self.buf.get(self.pos) {
            if !b.is_ascii_whitespace() {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    fn run(&mut self, item: &mut OnItem) -> Result<bool, Malformed> {
        loop {
            if self.extent.is_none() {
                let Some(b) = self.skip_whitespace() else {
                    return Ok(true);
                };
                match self.structure(b)? {
                    Step::Consumed => self.pos += 1,
                    Step::Moved => {}
                    Step::More => return Ok(true),
                }
                continue;
            }
            // A value whose end is being looked for: an item, or another top-level key's value.
            let Some(extent) = self.extent.as_mut() else {
                continue;
            };
            let Some(end) = extent.advance(&self.buf, self.pos) else {
                return Ok(true);
            };
            let depth = extent.deepest;
            self.extent = None;
            if !self.value_read(end, depth, item)? {
                return Ok(false);
            }
            self.pos = end;
        }
    }

    /// The listing's structure at the byte `b` (not whitespace) outside any value: what the state moves to.
    fn structure(&mut self, b: u8) -> Result<Step, Malformed> {
        match (self.state, b) {
            (State::Start, b'{') => self.state = State::Key { first: true },
            (State::Start, _) => return Err(unexpected(b, "a listing object with `items`")),
            (State::Key { first: true }, b'}') => self.state = State::Done,
            (State::Key { .. }, b'"') => return self.key_read(),
            (State::Key { .. }, _) => return Err(unexpected(b, "a key")),
            (State::Value { items: true }, b'[') => {
                self.seen.items = Some(0);
                self.state = State::Item { first: true };
            }
            (State::Value { items: true }, b'n') => {
                if self.buf.len() < self.pos + 4 {
                    return Ok(Step::More);
                }
                if &self.buf[self.pos..self.pos + 4] != b"null" {
                    return Err(unexpected(b, "`items` as an array of Applications"));
                }
                self.pos += 3;
                self.state = State::AfterValue;
            }
            (State::Value { items: true }, _) => {
                return Err(unexpected(b, "`items` as an array of Applications"));
            }
            (State::Item { first: true }, b']') | (State::AfterItem, b']') => {
                self.state = State::AfterValue;
            }
            (State::Item { .. } | State::Value { items: false }, _) => {
                self.extent = Some(Extent::new(self.pos));
                return Ok(Step::Moved);
            }
            (State::AfterItem, b',') => self.state = State::Item { first: false },
            (State::AfterItem, _) => return Err(unexpected(b, "`,` or `]` after an item")),
            (State::AfterValue, b',') => self.state = State::Key { first: false },
            (State::AfterValue, b'}') => self.state = State::Done,
            (State::AfterValue, _) => return Err(unexpected(b, "`,` or `}` after a value")),
            (State::Done, _) => return Err(unexpected(b, "nothing after the listing")),
        }
        Ok(Step::Consumed)
    }

    /// A top-level key and its colon (either may still be in the next chunk): the state moves to its value.
    fn key_read(&mut self) -> Result<Step, Malformed> {
        let Some(end) = string_end(&self.buf, self.pos + 1) else {
            return Ok(Step::More);
        };
        let key = &self.buf[self.pos + 1..end - 1];
        // Past the key and its colon; the colon may be in the next chunk.
        let Some(colon) = self.buf[end..].iter().position(|b| !b.is_ascii_whitespace()) else {
            return Ok(Step::More);
        };
        if self.buf[end + colon] != b':' {
            return Err(unexpected(self.buf[end + colon], "`:` after a key"));
        }
        let items = key == b"items";
        if items && self.items_key {
            return Err("duplicate field `items`".into());
        }
        self.items_key |= items;
        self.key = key.to_vec();
        self.pos = end + colon + 1;
        self.state = State::Value { items };
        Ok(Step::Moved)
    }

    /// A whole value read, up to `end` (`depth` its deepest nesting): an item goes to `item` (which says whether
    /// to go on); `metadata` gives the continue token; any other key's value is checked to be JSON.
    fn value_read(&mut self, end: usize, depth: u32, item: &mut OnItem) -> Result<bool, Malformed> {
        let value = &self.buf[self.pos..end];
        if let State::Item { .. } = self.state {
            self.seen.items = self.seen.items.map(|n| n + 1);
            if !item(value, depth)? {
                return Ok(false);
            }
            self.state = State::AfterItem;
        } else {
            if self.key == b"metadata" {
                let meta: Option<ListMeta> = serde_json::from_slice(value).map_err(|e| format!("metadata: {e}"))?;
                self.seen.continue_token = meta.and_then(|m| m.r#continue);
            } else {
                serde_json::from_slice::<IgnoredAny>(value).map_err(|e| {
                    format!(
                        "{}: {e}",
                        String::from_utf8_lossy(&self.key).chars().take(64).collect::<String>()
                    )
                })?;
            }
            self.state = State::AfterValue;
        }
        Ok(true)
    }
}

/// What one byte of the listing's structure did: consumed it, moved the position itself, or needs the next chunk.
enum Step {
    Consumed,
    Moved,
    More,
}

#[derive(Deserialize)]
struct ListMeta {
    r#continue: Option<String>,
}

fn unexpected(b: u8, expected: &str) -> Malformed {
    let found = if b.is_ascii_graphic() {
        format!("`{}`", b as char)
    } else {
        format!("byte 0x{b:02x}")
    };
    format!("expected {expected}, found {found}")
}

/// The index just past the closing quote of the string whose content begins at `from`, if it is in `buf`.
fn string_end(buf: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let i = from + memchr::memchr2(b'"', b'\\', buf.get(from..)?)?;
        if buf[i] == b'"' {
            return Some(i + 1);
        }
        from = i + 2;
    }
}

impl Extent {
    fn new(at: usize) -> Self {
        Self {
            at,
            depth: 0,
            deepest: 0,
            in_string: false,
            escaped: false,
        }
    }

    /// The end (exclusive) of the value that begins at `start`, if `buf` holds all of it; else where to go on from.
    fn advance(&mut self, buf: &[u8], start: usize) -> Option<usize> {
        if self.at == start {
            match buf.get(start)? {
                b'{' | b'[' => {
                    self.depth = 1;
                    self.deepest = 1;
                }
                b'"' => self.in_string = true,
                _ => {
                    // A number, `true`, `false` or `null`: it ends where a delimiter begins (checked by serde_json).
                    let len = buf[start..]
                        .iter()
                        .position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())?;
                    return Some(start + len);
                }
            }
            self.at += 1;
        }
        while self.at < buf.len() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    self.at += 1;
                    continue;
                }
                let Some(i) = memchr::memchr2(b'"', b'\\', &buf[self.at..]) else {
                    self.at = buf.len();
                    return None;
                };
                self.at += i;
                if buf[self.at] == b'\\' {
                    self.escaped = true;
                } else {
                    self.in_string = false;
                    if self.depth == 0 {
                        return Some(self.at + 1);
                    }
                }
                self.at += 1;
                continue;
            }
            match buf[self.at] {
                b'"' => self.in_string = true,
                b'{' | b'[' => {
                    self.depth += 1;
                    self.deepest = self.deepest.max(self.depth);
                }
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return Some(self.at + 1);
                    }
                }
                _ => {}
            }
            self.at += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames `body` fed in chunks of `size`: the items' texts, and how it ended.
    fn frame(body: &[u8], size: usize) -> (Vec<String>, Result<Seen, Malformed>) {
        let mut scanner = Scanner::new();
        let mut items = Vec::new();
        for chunk in body.chunks(size.max(1)) {
            let fed = scanner.feed(chunk, &mut |item, _| {
                items.push(String::from_utf8_lossy(item).into_owned());
                Ok(true)
            });
            if let Err(e) = fed {
                return (items, Err(e));
            }
        }
        (items, scanner.finish())
    }

    #[test]
    fn items_are_cut_out_whole_whatever_the_chunks() {
        let body = br#" { "kind" : "ApplicationList", "metadata" : {"resourceVersion": "7", "continue": ""},
            "items" : [ {"metadata": {"name": "a\"}]{["}, "n": [1, {"x": "\\"}]}, 17, "s]", null,
            {"metadata": {"name": "b"}} ] , "extra": [true, false, -1.5e3] } "#;
        let want = [
            r#"{"metadata": {"name": "a\"}]{["}, "n": [1, {"x": "\\"}]}"#,
            "17",
            r#""s]""#,
            "null",
            r#"{"metadata": {"name": "b"}}"#,
        ];
        for size in [1, 2, 3, 7, 64, 4096] {
            let (items, seen) = frame(body, size);
            assert_eq!(items, want, "chunks of {size}");
            let seen = seen.expect("a complete listing");
            assert_eq!(seen.items, Some(5));
            assert_eq!(seen.continue_token.as_deref(), Some(""));
        }
    }

    #[test]
    fn what_is_not_a_listing_object_is_refused_with_what_was_expected() {
        for (body, says) in [
            (&b""[..], "empty"),
            (b"   ", "empty"),
            (b"[]", "expected a listing object"),
            (br#"{"items": 3}"#, "`items` as an array"),
            (br#"{"items": {"a": 1}}"#, "`items` as an array"),
            (br#"{"items": nul}"#, "`items` as an array"),
            (br#"{"items": [{"metadata": {"name": "a"}}"#, "cut"),
            (br#"{"items": []} trailing"#, "nothing after the listing"),
            (br#"{"items": [], "items": []}"#, "duplicate field `items`"),
            (br#"{"items": [] "metadata": {}}"#, "`,` or `}`"),
            (br#"{"items": [{} {}]}"#, "`,` or `]`"),
            (
                br#"{"items": [], "metadata": {"continue": 3}}"#,
                "metadata: invalid type",
            ),
            (br#"{"items": [], "kind": tru}"#, "kind: "),
            (br#"{"items": [], "kind" "x"}"#, "`:` after a key"),
            (br#"{"items": [], 3: 4}"#, "expected a key"),
        ] {
            for size in [1, 5, 4096] {
                let (_, end) = frame(body, size);
                let e = end.expect_err(&String::from_utf8_lossy(body));
                assert!(e.contains(says), "{}: {e}", String::from_utf8_lossy(body));
            }
        }
    }

    #[test]
    fn an_absent_or_null_items_and_an_empty_object_say_so() {
        for body in [&b"{}"[..], br#"{"items": null}"#, br#"{"metadata": {}}"#] {
            let (items, seen) = frame(body, 3);
            assert!(items.is_empty());
            assert_eq!(
                seen.expect("well-formed").items,
                None,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let (_, seen) = frame(br#"{"items": [ ]}"#, 2);
        assert_eq!(seen.expect("well-formed").items, Some(0));
    }

    #[test]
    fn each_item_comes_with_how_deep_it_nests() {
        let mut scanner = Scanner::new();
        let mut depths = Vec::new();
        let body = br#"{"items": [1, {}, {"a": [{"b": "]]]"}]}, [[[[]]]]]}"#;
        for chunk in body.chunks(3) {
            scanner
                .feed(chunk, &mut |_, depth| {
                    depths.push(depth);
                    Ok(true)
                })
                .expect("well-formed");
        }
        assert_eq!(depths, [0, 1, 3, 4]);
    }

    #[test]
    fn an_item_that_stops_the_reader_stops_the_framing() {
        let mut scanner = Scanner::new();
        let mut n = 0;
        let going = scanner
            .feed(br#"{"items": [1, 2, 3]}"#, &mut |_, _| {
                n += 1;
                Ok(n < 2)
            })
            .expect("well-formed");
        assert!(!going);
        assert_eq!(n, 2);
    }
}
