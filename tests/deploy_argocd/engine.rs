//! A model of Argo CD's notifications-engine, as far as the kit's tests need it: the trigger expressions (the part of
//! the expr language the kit uses) and the notified-state annotation that decides whether a trigger sends.
//!
//! The rules, as notifications-engine applies them (`pkg/triggers/service.go`, `pkg/controller/controller.go`,
//! `pkg/controller/state.go`):
//! - each condition of a trigger has a key of its own; its `oncePer` is evaluated only while `when` is true, and its
//!   value (printed like Go's `%v`) is prefixed to the key;
//! - an Application's state is one map `key → Unix seconds`, kept in its `notified.notifications.argoproj.io`
//!   annotation: a true condition whose key is absent is sent and its key added; a false condition removes the key it
//!   would have without `oncePer` (so an entry with an `oncePer` value is never removed this way); a failed send
//!   removes the key again unless the condition has `oncePer`;
//! - after each evaluation the map is cut to 100 entries, the oldest dropped first;
//! - a condition whose expression fails is not triggered (Argo CD logs the error): the model records it, so that a test
//!   can demand that the kit's expressions never fail.
//!
//! The expression subset: literals (`nil`, `true`, `false`, integers, quoted strings, `[…]`), member access with `.`
//! and `?.`, `[…]` indexing, `not`/`!`, `and`/`&&`, `or`/`||`, `==`, `!=`, `in`, `+`, the ternary `?:`, and the
//! builtins `any`, `all`, `filter`, `map` (with a `{…}` closure over `#`, `.field` meaning `#.field`) and `len` — all in
//! expr since 1.9, and in the 1.17 that Argo CD builds with. An expression using anything else does not parse here:
//! the kit then needs a look at the expr version it requires before this model learns it.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// The number of entries notifications-engine keeps in one Application's notified state.
pub const NOTIFIED_HISTORY_MAX: usize = 100;

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Int(i64),
    Op(&'static str),
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    const OPS: &[&str] = &[
        "?.", "==", "!=", "&&", "||", "?", ":", ".", "(", ")", "[", "]", "{", "}", ",", "+", "!", "#",
    ];
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '\'' || c == '"' {
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(format!("unterminated string in `{text}`")),
                    Some('\\') => {
                        s.push(*chars.get(i + 1).ok_or("a trailing backslash")?);
                        i += 2;
                    }
                    Some(q) if *q == c => {
                        i += 1;
                        break;
                    }
                    Some(other) => {
                        s.push(*other);
                        i += 1;
                    }
                }
            }
            tokens.push(Token::Str(s));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let digits: String = chars[start..i].iter().collect();
            tokens.push(Token::Int(digits.parse().map_err(|e| format!("{digits}: {e}"))?));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token::Ident(chars[start..i].iter().collect()));
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let op = OPS
                .iter()
                .find(|op| rest.starts_with(**op))
                .ok_or_else(|| format!("`{c}` is not in the expression subset this model knows: `{text}`"))?;
            tokens.push(Token::Op(op));
            i += op.len();
        }
    }
    Ok(tokens)
}

/// A parsed expression.
#[derive(Debug, Clone)]
pub enum Expr {
    Literal(Value),
    Array(Vec<Expr>),
    Variable(String),
    /// `#`, the element a closure is called with.
    Element,
    Member {
        object: Box<Expr>,
        field: String,
        optional: bool,
    },
    Index {
        object: Box<Expr>,
        index: Box<Expr>,
    },
    Not(Box<Expr>),
    Binary {
        op: &'static str,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    Ternary {
        condition: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    Call {
        name: String,
        args: Vec<Expr>,
    },
    Closure(Box<Expr>),
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Token::Op(o)) if *o == op) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), String> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(format!("expected `{op}`, found {:?}", self.peek()))
        }
    }

    fn expression(&mut self) -> Result<Expr, String> {
        let condition = self.binary(0)?;
        if self.eat("?") {
            let then = self.expression()?;
            self.expect(":")?;
            let otherwise = self.expression()?;
            return Ok(Expr::Ternary {
                condition: Box::new(condition),
                then: Box::new(then),
                otherwise: Box::new(otherwise),
            });
        }
        Ok(condition)
    }

    /// expr's precedences: `or` 10, `and` 15, `==` `!=` `in` 20, `+` 30; unary `not` 50, tighter than all of them.
    fn binary_op(&self) -> Option<(&'static str, u8)> {
        match self.peek()? {
            Token::Ident(w) if w == "or" => Some(("or", 10)),
            Token::Op("||") => Some(("or", 10)),
            Token::Ident(w) if w == "and" => Some(("and", 15)),
            Token::Op("&&") => Some(("and", 15)),
            Token::Op("==") => Some(("==", 20)),
            Token::Op("!=") => Some(("!=", 20)),
            Token::Ident(w) if w == "in" => Some(("in", 20)),
            Token::Op("+") => Some(("+", 30)),
            _ => None,
        }
    }

    fn binary(&mut self, min: u8) -> Result<Expr, String> {
        let mut left = self.unary()?;
        while let Some((op, precedence)) = self.binary_op() {
            if precedence <= min {
                break;
            }
            self.at += 1;
            let right = self.binary(precedence)?;
            left = Expr::Binary {
                op,
                left: Box::new(left),
                right: Box::new(right),
            };
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("!") || matches!(self.peek(), Some(Token::Ident(w)) if w == "not") {
            if matches!(self.peek(), Some(Token::Ident(w)) if w == "not") {
                self.at += 1;
            }
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Expr, String> {
        let mut expr = self.primary()?;
        loop {
            let optional = if self.eat("?.") {
                true
            } else if self.eat(".") {
                false
            } else if self.eat("[") {
                let index = self.expression()?;
                self.expect("]")?;
                expr = Expr::Index {
                    object: Box::new(expr),
                    index: Box::new(index),
                };
                continue;
            } else {
                return Ok(expr);
            };
            let Some(Token::Ident(field)) = self.next() else {
                return Err("a field name must follow `.` or `?.`".into());
            };
            expr = Expr::Member {
                object: Box::new(expr),
                field,
                optional,
            };
        }
    }

    fn list(&mut self, close: &str) -> Result<Vec<Expr>, String> {
        let mut items = Vec::new();
        if self.eat(close) {
            return Ok(items);
        }
        loop {
            items.push(self.expression()?);
            if self.eat(close) {
                return Ok(items);
            }
            self.expect(",")?;
        }
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Token::Str(s)) => Ok(Expr::Literal(Value::from(s))),
            Some(Token::Int(n)) => Ok(Expr::Literal(Value::from(n))),
            Some(Token::Op("(")) => {
                let e = self.expression()?;
                self.expect(")")?;
                Ok(e)
            }
            Some(Token::Op("[")) => Ok(Expr::Array(self.list("]")?)),
            Some(Token::Op("{")) => {
                let body = self.expression()?;
                self.expect("}")?;
                Ok(Expr::Closure(Box::new(body)))
            }
            Some(Token::Op("#")) => Ok(Expr::Element),
            // `.field` inside a closure is `#.field`.
            Some(Token::Op(".")) => match self.next() {
                Some(Token::Ident(field)) => Ok(Expr::Member {
                    object: Box::new(Expr::Element),
                    field,
                    optional: false,
                }),
                other => Err(format!("a field name must follow `.`, found {other:?}")),
            },
            Some(Token::Ident(word)) => match word.as_str() {
                "nil" => Ok(Expr::Literal(Value::Null)),
                "true" => Ok(Expr::Literal(Value::Bool(true))),
                "false" => Ok(Expr::Literal(Value::Bool(false))),
                "any" | "all" | "filter" | "map" | "len" => {
                    self.expect("(")?;
                    let args = self.list(")")?;
                    Ok(Expr::Call { name: word, args })
                }
                _ if self.peek() == Some(&Token::Op("(")) => {
                    Err(format!("`{word}(…)` is not a builtin this model knows"))
                }
                _ => Ok(Expr::Variable(word)),
            },
            other => Err(format!("unexpected {other:?}")),
        }
    }
}

/// Parses one expression, as `expr.Compile` would (the subset above).
pub fn parse(text: &str) -> Result<Expr, String> {
    let mut parser = Parser {
        tokens: tokenize(text)?,
        at: 0,
    };
    let expr = parser.expression()?;
    if parser.at != parser.tokens.len() {
        return Err(format!("unexpected {:?} in `{text}`", parser.peek()));
    }
    Ok(expr)
}

fn as_bool(v: &Value, what: &str) -> Result<bool, String> {
    v.as_bool().ok_or_else(|| format!("{what} needs a bool, got {v}"))
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn items<'a>(v: &'a Value, builtin: &str) -> Result<&'a Vec<Value>, String> {
    v.as_array()
        .ok_or_else(|| format!("{builtin}() cannot iterate over {v}"))
}

/// Evaluates `expr` with `vars` (`app` is the Application) and `element` as `#`.
pub fn eval(expr: &Expr, vars: &Value, element: Option<&Value>) -> Result<Value, String> {
    let eval_in = |e: &Expr| eval(e, vars, element);
    Ok(match expr {
        Expr::Literal(v) => v.clone(),
        Expr::Array(items) => Value::Array(items.iter().map(eval_in).collect::<Result<_, _>>()?),
        Expr::Variable(name) => vars.get(name).cloned().unwrap_or(Value::Null),
        Expr::Element => element.cloned().ok_or("`#` outside a closure")?,
        Expr::Member {
            object,
            field,
            optional,
        } => match eval_in(object)? {
            Value::Object(map) => map.get(field).cloned().unwrap_or(Value::Null),
            Value::Null if *optional => Value::Null,
            other => return Err(format!("cannot fetch {field} from {other}")),
        },
        Expr::Index { object, index } => match (eval_in(object)?, eval_in(index)?) {
            (Value::Object(map), Value::String(key)) => map.get(&key).cloned().unwrap_or(Value::Null),
            (Value::Array(list), Value::Number(n)) => n
                .as_u64()
                .and_then(|i| list.get(i as usize).cloned())
                .ok_or_else(|| format!("index {n} out of range"))?,
            (o, i) => return Err(format!("cannot index {o} with {i}")),
        },
        Expr::Not(inner) => Value::Bool(!as_bool(&eval_in(inner)?, "not")?),
        Expr::Binary { op, left, right } => {
            let l = eval_in(left)?;
            match *op {
                "and" => Value::Bool(as_bool(&l, "and")? && as_bool(&eval_in(right)?, "and")?),
                "or" => Value::Bool(as_bool(&l, "or")? || as_bool(&eval_in(right)?, "or")?),
                _ => {
                    let r = eval_in(right)?;
                    match *op {
                        "==" => Value::Bool(equal(&l, &r)),
                        "!=" => Value::Bool(!equal(&l, &r)),
                        "in" => match &r {
                            Value::Array(list) => Value::Bool(list.iter().any(|x| equal(x, &l))),
                            Value::Object(map) => Value::Bool(l.as_str().is_some_and(|k| map.contains_key(k))),
                            other => return Err(format!("operator in not defined on {other}")),
                        },
                        "+" => match (&l, &r) {
                            (Value::String(a), Value::String(b)) => Value::from(format!("{a}{b}")),
                            (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
                                (Some(a), Some(b)) => Value::from(a + b),
                                _ => Value::from(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
                            },
                            _ => return Err(format!("invalid operation: {l} + {r}")),
                        },
                        _ => unreachable!("the parser makes no other operator"),
                    }
                }
            }
        }
        Expr::Ternary {
            condition,
            then,
            otherwise,
        } => {
            if as_bool(&eval_in(condition)?, "?:")? {
                eval_in(then)?
            } else {
                eval_in(otherwise)?
            }
        }
        Expr::Call { name, args } => call(name, args, vars, element)?,
        Expr::Closure(_) => return Err("a closure is only an argument of a builtin".into()),
    })
}

fn call(name: &str, args: &[Expr], vars: &Value, element: Option<&Value>) -> Result<Value, String> {
    if name == "len" {
        let [arg] = args else {
            return Err("len() takes one argument".into());
        };
        return Ok(Value::from(match eval(arg, vars, element)? {
            Value::Array(a) => a.len(),
            Value::Object(o) => o.len(),
            Value::String(s) => s.chars().count(),
            other => return Err(format!("invalid argument for len (type {other})")),
        }));
    }
    let [collection, Expr::Closure(body)] = args else {
        return Err(format!("{name}() takes a collection and a {{…}} closure"));
    };
    let collection = eval(collection, vars, element)?;
    let list = items(&collection, name)?;
    let mut results = Vec::with_capacity(list.len());
    for item in list {
        results.push((item, eval(body, vars, Some(item))?));
    }
    let test = |v: &Value| as_bool(v, name);
    Ok(match name {
        "any" => Value::Bool(
            results
                .iter()
                .map(|(_, r)| test(r))
                .collect::<Result<Vec<_>, _>>()?
                .contains(&true),
        ),
        "all" => Value::Bool(
            !results
                .iter()
                .map(|(_, r)| test(r))
                .collect::<Result<Vec<_>, _>>()?
                .contains(&false),
        ),
        "filter" => {
            let mut kept = Vec::new();
            for (item, r) in results {
                if test(&r)? {
                    kept.push(item.clone());
                }
            }
            Value::Array(kept)
        }
        "map" => Value::Array(results.into_iter().map(|(_, r)| r).collect()),
        _ => unreachable!("the parser makes no other builtin"),
    })
}

/// Go's `%v`, which notifications-engine uses to turn an `oncePer` value into part of a key.
pub struct GoValue<'a>(pub &'a Value);

impl fmt::Display for GoValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Value::Null => write!(f, "<nil>"),
            Value::String(s) => write!(f, "{s}"),
            Value::Array(items) => {
                write!(f, "[")?;
                for (i, item) in items.iter().enumerate() {
                    write!(f, "{}{}", if i == 0 { "" } else { " " }, GoValue(item))?;
                }
                write!(f, "]")
            }
            Value::Object(map) => {
                write!(f, "map[")?;
                for (i, (k, v)) in map.iter().enumerate() {
                    write!(f, "{}{k}:{}", if i == 0 { "" } else { " " }, GoValue(v))?;
                }
                write!(f, "]")
            }
            other => write!(f, "{other}"),
        }
    }
}

/// One condition of a trigger, compiled.
pub struct Condition {
    key: String,
    when: Expr,
    once_per: Option<Expr>,
}

/// A trigger: its name and conditions, as in `trigger.<name>` of `argocd-notifications-cm`.
pub struct Trigger {
    pub name: String,
    conditions: Vec<Condition>,
}

impl Trigger {
    /// `conditions` is the trigger's YAML list, already parsed; every `when` and `oncePer` must compile.
    pub fn compile(name: &str, conditions: &[Value]) -> Result<Self, String> {
        let conditions = conditions
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let when = c["when"].as_str().unwrap_or("false");
                Ok(Condition {
                    // notifications-engine: `[i].<sha1 of when>`; any value unique per condition serves here.
                    key: format!("[{i}].{when}"),
                    when: parse(when).map_err(|e| format!("trigger.{name}[{i}].when: {e}"))?,
                    once_per: match c.get("oncePer").and_then(Value::as_str) {
                        Some(o) => Some(parse(o).map_err(|e| format!("trigger.{name}[{i}].oncePer: {e}"))?),
                        None => None,
                    },
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Trigger {
            name: name.to_string(),
            conditions,
        })
    }
}

/// Where a subscription sends: `service` or `service:recipient`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Destination {
    pub service: String,
    pub recipient: String,
}

impl Destination {
    pub fn parse(recipient: &str) -> Self {
        let (service, recipient) = recipient.split_once(':').unwrap_or((recipient, ""));
        Destination {
            service: service.to_string(),
            recipient: recipient.to_string(),
        }
    }
}

/// One notification the engine sent (or tried to send).
pub struct Notification {
    pub trigger: String,
    pub destination: Destination,
    pub delivered: bool,
}

/// The engine for one Application: its triggers, subscriptions and notified state.
#[derive(Default)]
pub struct Engine {
    triggers: Vec<Trigger>,
    subscriptions: Vec<(String, Destination)>,
    /// The notified-state annotation: key → Unix seconds of the send.
    pub state: BTreeMap<String, i64>,
    /// Which trigger each key of `state` belongs to.
    owner: BTreeMap<String, String>,
    pub sends: Vec<Notification>,
    /// Entries the 100-entry cut removed.
    pub pushed_out: Vec<String>,
    /// Expression errors (Argo CD logs them and treats the condition as false).
    pub errors: Vec<String>,
}

impl Engine {
    pub fn add_trigger(&mut self, trigger: Trigger) {
        self.triggers.push(trigger);
    }

    pub fn subscribe(&mut self, trigger: &str, recipient: &str) {
        self.subscriptions
            .push((trigger.to_string(), Destination::parse(recipient)));
    }

    /// The state keys belonging to one trigger.
    pub fn entries_of(&self, trigger: &str) -> usize {
        self.state.keys().filter(|k| self.owner[*k] == trigger).count()
    }

    /// One evaluation of the Application `app` at `now` (Unix seconds); `deliver` says whether a send succeeds.
    pub fn evaluate(&mut self, app: &Value, now: i64, deliver: &mut dyn FnMut(&str, &Destination) -> bool) {
        let vars = serde_json::json!({ "app": app });
        for trigger in &self.triggers {
            let destinations: Vec<&Destination> = self
                .subscriptions
                .iter()
                .filter(|(t, _)| *t == trigger.name)
                .map(|(_, d)| d)
                .collect();
            if destinations.is_empty() {
                continue;
            }
            for condition in &trigger.conditions {
                let triggered = match eval(&condition.when, &vars, None) {
                    Ok(v) => v.as_bool() == Some(true),
                    Err(e) => {
                        self.errors.push(format!("trigger.{} when: {e}", trigger.name));
                        false
                    }
                };
                let once_per = match (&condition.once_per, triggered) {
                    (Some(expr), true) => match eval(expr, &vars, None) {
                        Ok(v) => GoValue(&v).to_string(),
                        Err(e) => {
                            self.errors.push(format!("trigger.{} oncePer: {e}", trigger.name));
                            String::new()
                        }
                    },
                    _ => String::new(),
                };
                for destination in &destinations {
                    let mut key = format!(
                        "{}:{}:{}:{}",
                        trigger.name, condition.key, destination.service, destination.recipient
                    );
                    if !once_per.is_empty() {
                        key = format!("{once_per}:{key}");
                    }
                    if !triggered {
                        // The key without `oncePer`: an entry with an `oncePer` value stays.
                        self.state.remove(&key);
                        continue;
                    }
                    if self.state.contains_key(&key) {
                        continue;
                    }
                    self.state.insert(key.clone(), now);
                    self.owner.insert(key.clone(), trigger.name.clone());
                    let delivered = deliver(&trigger.name, destination);
                    if !delivered && once_per.is_empty() {
                        self.state.remove(&key);
                    }
                    self.sends.push(Notification {
                        trigger: trigger.name.clone(),
                        destination: (*destination).clone(),
                        delivered,
                    });
                }
            }
        }
        self.truncate();
    }

    /// `NotificationsState.truncate`: oldest first (ties, which Go's unstable sort leaves in any order, by key here).
    fn truncate(&mut self) {
        let excess = self.state.len().saturating_sub(NOTIFIED_HISTORY_MAX);
        if excess == 0 {
            return;
        }
        let mut by_age: Vec<(i64, String)> = self.state.iter().map(|(k, t)| (*t, k.clone())).collect();
        by_age.sort();
        for (_, key) in by_age.into_iter().take(excess) {
            self.state.remove(&key);
            self.pushed_out.push(key);
        }
    }
}
