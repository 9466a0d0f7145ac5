//! Text from Argo CD (annotations, health and operation messages, resource names, condition messages) written into
//! each target's markup so that it reads as text: no mention, no link or image Herald did not put there, no raw
//! HTML, no line break inside a one-line field. Each target has its own rules; what they share is here.
//!
//! Where a target has an escape (CommonMark's backslash and entities, Slack's and HTML's entities, Jira wiki's
//! backslash) it is used. Where it has none (Google Chat's own markup, Teams' TextBlock Markdown), an invisible
//! word joiner (U+2060) breaks the sequence that would be read as markup: `<`+`users/all>`, `]`+`(`, `@`+`all`.

/// Invisible and without width: placed inside `<!channel>` or `@all` it breaks the markup and not the reading.
pub const WORD_JOINER: char = '\u{2060}';

/// Characters that end a line somewhere: LF, CR, NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR (and VT, FF).
fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

/// One line: line breaks, tabs and other control characters become spaces.
pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() || is_line_break(c) { ' ' } else { c })
        .collect()
}

/// The lines of a multi-line message as Herald shows them, each one a line (`\r\n`, `\r`, U+2028… all end one).
/// Blank lines are dropped: they would end a Markdown quote or list.
pub fn message_lines(s: &str) -> Vec<String> {
    s.split(is_line_break)
        .map(one_line)
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// Plain text for a terminal or a log: control characters (an ANSI escape, a line break inside a field) are shown
/// as escapes (`\x1b`, `\n`) rather than acted on.
pub fn console(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || is_line_break(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// `@` followed by a word is a mention on most chat targets (`@channel`, `@all`, `@here`, `@room`, `@user`,
/// `@org/team`) when it starts a word: every target reads mentions that way, so an `@` after a letter or digit
/// (`alice@example.com`) and anything inside a URL (`https://host/@alice`, up to the next space or delimiter) is
/// left as it is, byte for byte, and stays searchable and copyable; only a mention of everyone (`/@channel`) is
/// broken even there ([`is_group_mention`]).
pub fn break_mentions(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev: Option<char> = None;
    let mut in_url = false;
    for (k, c) in s.char_indices() {
        if ends_url(c) {
            in_url = false;
        } else if !in_url && !prev.is_some_and(char::is_alphanumeric) && starts_url(&s[k..]) {
            in_url = true;
        }
        out.push(c);
        let next = s[k + c.len_utf8()..].chars().next();
        if c == '@'
            && !prev.is_some_and(char::is_alphanumeric)
            && next.is_some_and(char::is_alphanumeric)
            && (!in_url || is_group_mention(&s[k + 1..]))
        {
            out.push(WORD_JOINER);
        }
        prev = Some(c);
    }
    out
}

/// Whether `s` (what follows an `@`) is a mention of everyone (`here`, `channel`, `all`, `everyone`, `room`). A chat
/// that splits words at `/` (Mattermost) would read one even inside a URL's path, so it is broken there too; such a
/// path is not one a real link has.
fn is_group_mention(s: &str) -> bool {
    let word: String = s.chars().take_while(|c| c.is_alphanumeric()).collect();
    ["here", "channel", "all", "everyone", "room"]
        .iter()
        .any(|g| word.eq_ignore_ascii_case(g))
}

/// Whether `s` starts with a URL scheme Herald or a chat would link (`https://`, `http://`, `mailto:`).
fn starts_url(s: &str) -> bool {
    ["https://", "http://", "mailto:"]
        .iter()
        .any(|scheme| s.get(..scheme.len()).is_some_and(|p| p.eq_ignore_ascii_case(scheme)))
}

/// What ends a URL in text: a space or line break, or a character that closes it in markup (`<url|text>`, `(url)`,
/// `"url"`).
fn ends_url(c: char) -> bool {
    c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | '|' | '"' | '\'' | '(' | ')' | '[' | ']' | '`')
}

/// Whether `s` starts a web address a chat links by itself: a scheme (`https://`, `http://`, `ftp://`…) or `www.`.
fn starts_web_address(s: &str) -> bool {
    let scheme: String = s
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        .collect();
    let after = &s[scheme.len()..];
    (!scheme.is_empty() && scheme.starts_with(|c: char| c.is_ascii_alphabetic()) && after.starts_with("://"))
        || s.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("www."))
}

/// Web addresses in text from Argo CD made unlinkable: Slack, Mattermost, GitHub, Teams, Telegram, Discord and Matrix
/// clients, and mail clients, link a bare `https://…` (and Slack a bare `www.host`) by themselves, so a message could carry a link
/// Herald did not put there. A word joiner before the scheme's `:` and before each `.` of the host breaks every
/// linker's match and nothing a reader sees; the rest of the address is left as it is. Addresses without a scheme
/// or `www.` (`alice@example.com`, `mailto:` links, resource names such as `deployments.apps`) are left alone.
pub fn defuse_links(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut prev: Option<char> = None;
    // In a web address: whether still in its scheme, and whether still in its host.
    let (mut in_scheme, mut in_host) = (false, false);
    for (k, c) in s.char_indices() {
        if ends_url(c) {
            (in_scheme, in_host) = (false, false);
        } else if !in_scheme && !in_host && !prev.is_some_and(|p| p.is_alphanumeric()) && starts_web_address(&s[k..]) {
            in_scheme = !s[k..].get(..4).is_some_and(|p| p.eq_ignore_ascii_case("www."));
            in_host = true;
        }
        if in_scheme && c == ':' {
            out.push(WORD_JOINER);
            in_scheme = false;
        } else if in_host && !in_scheme && c == '.' {
            out.push(WORD_JOINER);
        } else if in_host && !in_scheme && matches!(c, '/' | '?' | '#') && !matches!(prev, Some(':' | '/')) {
            in_host = false;
        }
        out.push(c);
        prev = Some(c);
    }
    out
}

/// CommonMark inline text (GitHub, Mattermost): one line, mentions broken, `&`, `<` and `>` as entities (no HTML,
/// no autolink, and nothing Mattermost's Slack-compatible `<!channel>` / `<url|text>` rewriting can match), and
/// every character that starts emphasis, code, links, images or tables escaped with a backslash.
pub fn commonmark(s: &str) -> String {
    commonmark_keep_links(&defuse_links(s))
}

/// [`commonmark`] with web addresses left linkable: for a receiver's template, whose values include Herald's own
/// links (`text`, `status_url`).
pub fn commonmark_keep_links(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in break_mentions(&one_line(s)).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '(' | ')' | '!' | '#' | '|' | '~' | '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Slack mrkdwn: one line, mentions broken, and `&`, `<`, `>` as the entities Slack asks for (`<!channel>`,
/// `<url|text>` and `<@U123>` all start with `<`).
pub fn mrkdwn(s: &str) -> String {
    mrkdwn_keep_lines(&defuse_links(&one_line(s)))
}

/// [`mrkdwn`] with web addresses left linkable: for a receiver's template (see [`commonmark_keep_links`]).
pub fn mrkdwn_keep_links(s: &str) -> String {
    mrkdwn_keep_lines(&one_line(s))
}

/// Slack mrkdwn escaping that keeps line breaks, for text already laid out in lines.
pub fn mrkdwn_keep_lines(s: &str) -> String {
    break_mentions(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Discord's Markdown (embed titles, descriptions and field values): one line, mentions broken, a word joiner
/// after `<` (user, role and channel mentions `<@123>`, `<#123>`, custom emoji, timestamps and `<url>` all start
/// with it), and a backslash before every character that starts emphasis, underline, strike-through, spoilers
/// (`||`), code or masked links (`[text](url)`), and before a first `#`, `-`, `+` or `>` (a heading, a list, a
/// quote where the text starts a line). Discord's escape takes any punctuation. A bare web address is shown whole
/// but not linked ([`defuse_links`]), as in the other chats.
pub fn discord(s: &str) -> String {
    discord_keep_links(&defuse_links(s))
}

/// [`discord`] with web addresses left linkable: for a receiver's template (see [`commonmark_keep_links`]).
pub fn discord_keep_links(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut leading = true;
    for c in break_mentions(&one_line(s)).chars() {
        let starts_block = leading && matches!(c, '#' | '-' | '+' | '>');
        leading = leading && c.is_whitespace();
        match c {
            '\\' | '*' | '_' | '~' | '|' | '`' | '[' | ']' | '(' | ')' => {
                out.push('\\');
                out.push(c);
            }
            c if starts_block => {
                out.push('\\');
                out.push(c);
            }
            '<' => {
                out.push(c);
                out.push(WORD_JOINER);
            }
            c => out.push(c),
        }
    }
    out
}

/// A Discord code span: literal inside (no escape works there), so only what a code span cannot stop is broken:
/// a mention and `<`; a backtick would end it and becomes `'`.
pub fn discord_code(s: &str) -> String {
    format!("`{}`", break_angles(&break_mentions(&one_line(s))).replace('`', "'"))
}

/// Telegram's HTML (`parse_mode: HTML`): one line, mentions broken (Telegram links `@username` by itself), and
/// `&`, `<`, `>` as the entities Telegram documents, so no text can open one of its tags.
pub fn telegram(s: &str) -> String {
    telegram_keep_lines(&defuse_links(&one_line(s)))
}

/// [`telegram`] with web addresses left linkable: for a receiver's template (see [`commonmark_keep_links`]).
pub fn telegram_keep_links(s: &str) -> String {
    telegram_keep_lines(&one_line(s))
}

/// [`telegram`] that keeps line breaks, for text already laid out in lines (inside `<pre>`).
pub fn telegram_keep_lines(s: &str) -> String {
    let mut out = break_mentions(s);
    // A piece of text is often followed by a `<code>` span (a hint with a command in it): Telegram reads the
    // words across the tag, so an `@` that ends the piece is broken too.
    if out.ends_with('@') {
        out.push(WORD_JOINER);
    }
    out.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Google Chat's own markup (`MARKUP_SYNTAX_CHAT`) has no escape: a word joiner after `<` breaks links
/// (`<url|text>`) and mentions (`<users/all>`), one inside every run of three backticks keeps a code block
/// closed, and mentions written with `@` are broken too.
pub fn google_chat(s: &str) -> String {
    google_chat_keep_links(&defuse_links(s))
}

/// [`google_chat`] with web addresses left linkable: for a receiver's template (see [`commonmark_keep_links`]).
pub fn google_chat_keep_links(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut backticks = 0;
    for c in break_mentions(&one_line(s)).chars() {
        if c == '`' {
            backticks += 1;
            if backticks == 3 {
                out.push(WORD_JOINER);
                backticks = 1;
            }
        } else {
            backticks = 0;
        }
        out.push(c);
        if c == '<' {
            out.push(WORD_JOINER);
        }
    }
    out
}

/// Teams TextBlock Markdown (bold, italic, lists, `[text](url)` links; no escapes documented): [`chat_plain`],
/// and `*` and `_` escaped with a backslash so text does not turn bold.
pub fn teams(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in chat_plain(s).chars() {
        if matches!(c, '*' | '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Text a chat may read as Markdown or as its own tags (a Teams TextBlock, a button's title): one line, mentions
/// broken, and a word joiner after `<` (`<at>`, tags), between `]` and `(` (links) and between `!` and `[`
/// (images).
pub fn chat_plain(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut prev = '\0';
    for c in break_mentions(&defuse_links(&one_line(s))).chars() {
        if (prev == ']' && c == '(') || (prev == '!' && c == '[') {
            out.push(WORD_JOINER);
        }
        out.push(c);
        if c == '<' {
            out.push(WORD_JOINER);
        }
        prev = c;
    }
    out
}

/// HTML text and attribute values: one line, `&`, `<`, `>`, `"` and `'` as entities.
pub fn html(s: &str) -> String {
    html_keep_lines(&one_line(s))
}

/// HTML escaping that keeps line breaks (inside `<pre>`).
pub fn html_keep_lines(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Jira wiki markup (Data Center): one line, and every character that starts a link or mention (`[`), an image
/// (`!`), a table cell (`|`), a macro (`{`) or emphasis escaped with a backslash.
pub fn jira_wiki(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in defuse_links(&one_line(s)).chars() {
        if matches!(c, '{' | '}' | '[' | ']' | '|' | '*' | '_' | '!' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// ServiceNow journal and description text: shown as it is, except `[code]…[/code]`, whose inside is HTML. A word
/// joiner after every `[` that would open or close it (any case, spaces allowed) keeps it text.
pub fn servicenow(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for (k, c) in s.char_indices() {
        out.push(c);
        if c == '[' {
            let rest = s[k + 1..].trim_start().trim_start_matches('/').trim_start();
            if rest.get(..4).is_some_and(|w| w.eq_ignore_ascii_case("code")) {
                out.push(WORD_JOINER);
            }
        }
    }
    out
}

/// `s` with each of its lines escaped by `f` (a one-line escape), joined by `\n`: a multi-line value keeps its
/// lines, and no line can start markup `f` does not allow.
pub fn each_line(s: &str, f: impl Fn(&str) -> String) -> String {
    s.split(is_line_break).map(f).collect::<Vec<_>>().join("\n")
}

/// Herald's own texts (hints) quote commands between backticks: `f` escapes the text between them, `code` the
/// commands, so a name filled into a command is escaped like any other text.
pub fn with_code(s: &str, f: impl Fn(&str) -> String, code: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for (k, part) in s.split('`').enumerate() {
        if k % 2 == 0 {
            out.push_str(&f(part));
        } else if !part.trim().is_empty() {
            out.push_str(&code(part));
        }
    }
    out
}

/// A CommonMark code span: literal, so only what a code span cannot stop is broken (a mention or Mattermost's
/// `<!channel>` rewriting, which runs before Markdown does).
pub fn commonmark_code(s: &str) -> String {
    format!("`{}`", break_angles(&break_mentions(&one_line(s))).replace('`', "'"))
}

/// A word joiner after every `<`.
fn break_angles(s: &str) -> String {
    s.replace('<', "<\u{2060}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commonmark_keeps_text_as_text() {
        assert_eq!(
            commonmark("<!channel> @all [click me](https://evil.example) ![b](x.png)\n# h"),
            "&lt;\\!channel&gt; @\u{2060}all \\[click me\\]\\(https\u{2060}://evil\u{2060}.example\\) \\!\\[b\\]\\(x.png\\) \\# h"
        );
    }

    #[test]
    fn web_addresses_from_argo_cd_are_shown_whole_and_never_linked() {
        let wj = WORD_JOINER;
        let cases = [
            (
                "see https://evil.example/x?a=b.c",
                format!("see https{wj}://evil{wj}.example/x?a=b.c"),
            ),
            (
                "HTTP://Evil.Example:8443/p",
                format!("HTTP{wj}://Evil{wj}.Example:8443/p"),
            ),
            (
                "git+ssh://git.example.com/r.git",
                format!("git+ssh{wj}://git{wj}.example{wj}.com/r.git"),
            ),
            ("at www.evil.com today", format!("at www{wj}.evil{wj}.com today")),
            (
                "(https://a.b) and https://c.d",
                format!("(https{wj}://a{wj}.b) and https{wj}://c{wj}.d"),
            ),
            // Not web addresses: left byte for byte.
            (
                "alice@example.com mailto:bob@example.com",
                "alice@example.com mailto:bob@example.com".into(),
            ),
            (
                "deployments.apps/api v1.2.3 https:/half",
                "deployments.apps/api v1.2.3 https:/half".into(),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(defuse_links(text), want, "{text}");
            // What a reader sees (and copies, less the invisible joiners) is the address itself.
            assert_eq!(defuse_links(text).replace(wj, ""), text);
        }
        // Every chat's field escape defuses; a template's keeps Herald's own links.
        let url = "https://herald.example.com/s";
        for (name, f) in [
            ("mrkdwn", mrkdwn as fn(&str) -> String),
            ("commonmark", commonmark),
            ("discord", discord),
            ("telegram", telegram),
            ("google_chat", google_chat),
            ("teams", teams),
            ("chat_plain", chat_plain),
            ("jira_wiki", jira_wiki),
        ] {
            assert!(!f(url).contains("https://"), "{name}: {}", f(url));
        }
        for (name, f) in [
            ("mrkdwn", mrkdwn_keep_links as fn(&str) -> String),
            ("discord", discord_keep_links),
            ("telegram", telegram_keep_links),
            ("google_chat", google_chat_keep_links),
        ] {
            assert!(f(url).contains(url), "{name}: {}", f(url));
        }
        assert!(commonmark_keep_links(url).contains("https://herald.example.com/s"));
    }

    #[test]
    fn only_an_at_that_starts_a_word_outside_a_url_is_a_mention() {
        let j = WORD_JOINER;
        for (text, expected) in [
            ("alice@example.com".to_string(), "alice@example.com".to_string()),
            ("https://h.example/@alice/x".into(), "https://h.example/@alice/x".into()),
            ("HTTP://h.example/@alice".into(), "HTTP://h.example/@alice".into()),
            ("mailto:bob@example.com".into(), "mailto:bob@example.com".into()),
            ("@here".into(), format!("@{j}here")),
            ("(@channel)".into(), format!("(@{j}channel)")),
            ("x,@room".into(), format!("x,@{j}room")),
            ("_@all_".into(), format!("_@{j}all_")),
            (
                "https://h.example/ @here".into(),
                format!("https://h.example/ @{j}here"),
            ),
            (
                "<https://h.example|@here>".into(),
                format!("<https://h.example|@{j}here>"),
            ),
            ("see:https://h.example/@a".into(), "see:https://h.example/@a".into()),
            (
                "https://h.example/@channel".into(),
                format!("https://h.example/@{j}channel"),
            ),
            ("https://h.example/@allison".into(), "https://h.example/@allison".into()),
            ("@ alone, a@".into(), "@ alone, a@".into()),
        ] {
            assert_eq!(break_mentions(&text), expected, "{text:?}");
        }
    }

    #[test]
    fn servicenow_code_markup_is_text() {
        for hostile in [
            "[code]<img src=x onerror=alert(1)>[/code]",
            "[CODE]x[/Code]",
            "[ code ]x[ / code]",
        ] {
            let out = servicenow(hostile);
            assert!(
                !out.to_lowercase().contains("[code]") && !out.contains("[ code"),
                "{out:?}"
            );
            assert_eq!(out.replace(WORD_JOINER, ""), hostile);
        }
        assert_eq!(servicenow("[x] list [co"), "[x] list [co");
    }

    #[test]
    fn each_line_is_escaped_and_the_lines_are_kept() {
        assert_eq!(
            each_line("a <!here>\r\n@all", mrkdwn),
            "a &lt;!here&gt;\n\n@\u{2060}all"
        );
    }

    #[test]
    fn google_chat_breaks_links_mentions_and_code_fences() {
        assert_eq!(
            google_chat("<users/all> <https://evil.example|click> ```x"),
            "<\u{2060}users/all> <\u{2060}https\u{2060}://evil\u{2060}.example|click> ``\u{2060}`x"
        );
    }

    #[test]
    fn teams_breaks_links_images_and_tags() {
        assert_eq!(
            teams("[a](u) ![b](v) <at>x</at> *b*"),
            "[a]\u{2060}(u) !\u{2060}[b]\u{2060}(v) <\u{2060}at>x<\u{2060}/at> \\*b\\*"
        );
    }

    #[test]
    fn console_shows_control_characters_as_escapes() {
        assert_eq!(console("a\u{1b}[31m\nb\u{2028}"), "a\\u{1b}[31m\\nb\\u{2028}");
    }

    #[test]
    fn message_lines_end_at_every_line_break_and_drop_blank_ones() {
        assert_eq!(message_lines("a\r\nb\rc\u{2028}d\n\n"), ["a", "b", "c", "d"]);
    }
}
