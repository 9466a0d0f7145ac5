//! Matrix's HTML: the `formatted_body` of an `m.room.message` keeps only the tags and attributes the
//! client-server specification lists for `org.matrix.custom.html` (clients drop the rest, and some drop the
//! element with it). The shared HTML rendering is written for e-mail, with `style`, `align`, `border` and
//! `cellpadding`; here it is reduced to the subset, and mentions are broken in its text, never in a link.

use crate::receivers::render::escape::break_mentions;

/// The tags the specification suggests clients permit (`m.room.message` msgtypes, since v1.10).
pub(super) const TAGS: &[&str] = &[
    "del",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "p",
    "a",
    "ul",
    "ol",
    "sup",
    "sub",
    "li",
    "b",
    "i",
    "u",
    "strong",
    "em",
    "s",
    "code",
    "hr",
    "br",
    "div",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "caption",
    "pre",
    "span",
    "img",
    "details",
    "summary",
];

/// The attributes the specification lists for `tag`; every other attribute is dropped by clients.
pub(super) fn attributes(tag: &str) -> &'static [&'static str] {
    match tag {
        "span" => &["data-mx-bg-color", "data-mx-color", "data-mx-spoiler", "data-mx-maths"],
        "a" => &["target", "href"],
        "img" => &["width", "height", "alt", "title", "src"],
        "ol" => &["start"],
        "code" => &["class"],
        "div" => &["data-mx-maths"],
        _ => &[],
    }
}

/// `html` (Herald's own markup, every text in it escaped, so `<` only opens a tag) reduced to Matrix's subset:
/// tags outside it are left out (their text kept), attributes outside it dropped, and mentions in the text
/// broken. A text colour (`style="color:#cf222e"`, the status word's) is kept the way Matrix has one, as a
/// `<span data-mx-color>` inside the element.
pub(super) fn matrix_html(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut open = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        out.push_str(&break_mentions(&rest[..start]));
        let Some(close) = rest[start..].find('>') else {
            // Not a tag after all: text.
            out.push_str(&break_mentions(&rest[start..].replace('<', "&lt;")));
            return out;
        };
        tag(&rest[start + 1..start + close], &mut open, &mut out);
        rest = &rest[start + close + 1..];
    }
    out.push_str(&break_mentions(rest));
    out
}

/// Elements without content or end tag.
const VOID: &[&str] = &["br", "hr", "img"];

/// One tag (between `<` and `>`), written to `out` if Matrix permits it, with the attributes it permits. `open`
/// holds the elements opened so far and whether each opened a colour span, to close it with them.
fn tag(inside: &str, open: &mut Vec<(String, bool)>, out: &mut String) {
    let (closing, inside) = match inside.strip_prefix('/') {
        Some(rest) => (true, rest),
        None => (false, inside),
    };
    let inside = inside.trim_end_matches('/');
    let name_end = inside.find(|c: char| c.is_whitespace()).unwrap_or(inside.len());
    let name = inside[..name_end].to_ascii_lowercase();
    if !TAGS.contains(&name.as_str()) {
        return;
    }
    if closing {
        if let Some(k) = open.iter().rposition(|(n, _)| *n == name) {
            if open[k].1 {
                out.push_str("</span>");
            }
            open.truncate(k);
        }
        out.push_str(&format!("</{name}>"));
        return;
    }
    out.push('<');
    out.push_str(&name);
    let allowed = attributes(&name);
    let mut colour = None;
    for (attr, value) in parse_attributes(&inside[name_end..]) {
        if allowed.contains(&attr.as_str()) {
            out.push_str(&format!(" {attr}=\"{}\"", value.replace('"', "&quot;")));
        } else if attr == "style" {
            colour = text_colour(&value);
        }
    }
    out.push('>');
    if !VOID.contains(&name.as_str()) {
        if let Some(c) = &colour {
            out.push_str(&format!("<span data-mx-color=\"{c}\">"));
        }
        open.push((name, colour.is_some()));
    }
}

/// The text colour of a `style` attribute, when it is the six-digit hex colour Matrix's `data-mx-color` takes.
fn text_colour(style: &str) -> Option<String> {
    style.split(';').find_map(|declaration| {
        let (property, value) = declaration.split_once(':')?;
        let value = value.trim();
        let hex = value.strip_prefix('#')?;
        (property.trim().eq_ignore_ascii_case("color") && hex.len() == 6 && hex.chars().all(|c| c.is_ascii_hexdigit()))
            .then(|| value.to_ascii_lowercase())
    })
}

/// The attributes of a tag: `name="value"`, `name='value'`, `name=value` or `name` alone (an empty value).
pub(super) fn parse_attributes(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        let name_end = rest.find(|c: char| c.is_whitespace() || c == '=').unwrap_or(rest.len());
        let name = rest[..name_end].to_ascii_lowercase();
        rest = rest[name_end..].trim_start();
        let mut value = String::new();
        if let Some(after) = rest.strip_prefix('=') {
            let after = after.trim_start();
            let (v, remaining) = match after.chars().next() {
                Some(q @ ('"' | '\'')) => {
                    let body = &after[1..];
                    let end = body.find(q).unwrap_or(body.len());
                    (&body[..end], body.get(end + 1..).unwrap_or(""))
                }
                _ => {
                    let end = after.find(char::is_whitespace).unwrap_or(after.len());
                    (&after[..end], &after[end..])
                }
            };
            value = v.to_string();
            rest = remaining.trim_start();
        }
        if !name.is_empty() {
            out.push((name, value));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_colour_becomes_a_matrix_colour_and_other_styles_go() {
        assert_eq!(
            matrix_html(
                "<html><body style=\"color:#1f2328\"><h3 style=\"font-size:15px\"><b style=\"color:#CF222E\">FIRING</b> \
                 x</h3><th align=left style=\"background:#fff;color:red\">a</th><br></body></html>"
            ),
            "<h3><b><span data-mx-color=\"#cf222e\">FIRING</span></b> x</h3><th>a</th><br>"
        );
    }
}
