//! `kopt tune`'s search space: parameters and their values (lists,
//! ranges, space files in a small TOML subset) and constraints, a small
//! expression language (lexer, parser, evaluation) over them. Pure text in,
//! points out: no I/O, so a front end, the engine and the fuzzer share it.
//! Every mistake is a [`SpaceError`], one line naming what is wrong.

/// A space, parameter, value or constraint that is wrong, in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpaceError(pub String);

impl std::fmt::Display for SpaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpaceError {}

pub type Result<T, E = SpaceError> = std::result::Result<T, E>;

use std::collections::BTreeMap;

/// Values a range may expand to.
pub const MAX_VALUES: usize = 10_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Space {
    pub params: Vec<Param>,
    pub constraints: Vec<Expr>,
}

/// A value must be a plain token: it goes into a shell command.
pub fn check_value(name: &str, v: &str) -> Result<()> {
    let ok = !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-+:/@%".contains(c));
    if ok {
        Ok(())
    } else {
        Err(SpaceError(format!(
            "{name}: value {v:?} is not a plain token (letters, digits, . _ - + : / @ %)"
        )))
    }
}

fn check_name(name: &str) -> Result<()> {
    let ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(name, "and" | "or" | "not" | "CHECK");
    if ok {
        Ok(())
    } else {
        Err(SpaceError(format!(
            "parameter name {name:?}: letters, digits and _ (not CHECK, and, or, not)"
        )))
    }
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// `64,128,256`, `64..256 step 64` (inclusive), `16..256 x2` (geometric), or one value.
pub fn parse_values(name: &str, spec: &str) -> Result<Vec<String>> {
    let spec = spec.trim();
    let bad = |why: &str| SpaceError(format!("{name}={spec}: {why}"));
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(bad("an empty value"));
        }
        if let Some((a, rest)) = part.split_once("..") {
            let rest = rest.trim();
            let (b, how) = match rest.find(|c: char| c.is_whitespace() || c == 'x' || c == '*') {
                Some(i) => (&rest[..i], rest[i..].trim()),
                None => (rest, ""),
            };
            let num = |s: &str| {
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| bad(&format!("{s:?} is not a number")))
            };
            let (a, b) = (num(a)?, num(b)?);
            let (mul, step) = if let Some(s) = how.strip_prefix("step") {
                (false, num(s)?)
            } else if let Some(s) = how.strip_prefix('x').or_else(|| how.strip_prefix('*')) {
                (true, num(s)?)
            } else if how.is_empty() {
                (false, 1.0)
            } else {
                return Err(bad("a range is a..b, a..b step s, or a..b x f"));
            };
            if b < a {
                return Err(bad("the range's end is below its start"));
            }
            if (!mul && step <= 0.0) || (mul && (step <= 1.0 || a <= 0.0)) {
                return Err(bad(
                    "a step must be positive (a factor above 1, from a positive start)",
                ));
            }
            let mut x = a;
            let eps = 1e-9 * b.abs().max(1.0);
            while x <= b + eps {
                out.push(fmt_num(x));
                if out.len() > MAX_VALUES {
                    return Err(bad(&format!("more than {MAX_VALUES} values")));
                }
                x = if mul { x * step } else { x + step };
            }
        } else {
            out.push(part.to_string());
        }
    }
    for v in &out {
        check_value(name, v)?;
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|v| seen.insert(v.clone()));
    Ok(out)
}

/// `--param NAME=VALUES`.
pub fn parse_param(s: &str) -> Result<Param> {
    let (name, spec) = s
        .split_once('=')
        .ok_or_else(|| SpaceError(format!("--param {s}: expected NAME=VALUES")))?;
    let name = name.trim();
    check_name(name)?;
    Ok(Param {
        name: name.to_string(),
        values: parse_values(name, spec)?,
    })
}

/// `NAME=VAL,NAME=VAL` (`--baseline`).
pub fn parse_assignment(s: &str) -> Result<BTreeMap<String, String>> {
    let mut m = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (n, v) = part
            .split_once('=')
            .ok_or_else(|| SpaceError(format!("--baseline {s}: expected NAME=VALUE,...")))?;
        m.insert(n.trim().to_string(), v.trim().to_string());
    }
    if m.is_empty() {
        return Err(SpaceError("--baseline needs NAME=VALUE,...".into()));
    }
    Ok(m)
}

impl Space {
    pub fn new(params: Vec<Param>, constraints: &[String]) -> Result<Space> {
        let mut names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(SpaceError(format!("parameter {} is given twice", w[0])));
        }
        if let Some(p) = params.iter().find(|p| p.values.is_empty()) {
            return Err(SpaceError(format!("parameter {} has no values", p.name)));
        }
        let constraints = constraints
            .iter()
            .map(|c| Expr::parse(c, &names))
            .collect::<Result<_>>()?;
        Ok(Space {
            params,
            constraints,
        })
    }

    /// Points before the constraints (saturating).
    pub fn size_unfiltered(&self) -> usize {
        self.size_checked().unwrap_or(usize::MAX)
    }

    /// Points before the constraints; None when the product of the value
    /// counts does not fit a usize (more than 2^64 on 64-bit targets).
    pub fn size_checked(&self) -> Option<usize> {
        self.params
            .iter()
            .try_fold(1usize, |n, p| n.checked_mul(p.values.len()))
    }

    /// Every point that satisfies the constraints, in order (the last
    /// parameter varies fastest), and how many the constraints excluded.
    pub fn points(&self, max: usize) -> Result<(Vec<BTreeMap<String, String>>, usize)> {
        let Some(n) = self.size_checked().filter(|n| *n <= max) else {
            // A saturated count is no count: said as the bound it passed.
            let size = match self.size_checked() {
                Some(n) => n.to_string(),
                None => format!("more than {}", usize::MAX),
            };
            return Err(SpaceError(format!(
                "the space has {size} points, more than {max}: narrow it"
            )));
        };
        let mut out = Vec::new();
        let mut excluded = 0;
        let mut idx = vec![0usize; self.params.len()];
        for _ in 0..n {
            let point: BTreeMap<String, String> = self
                .params
                .iter()
                .zip(&idx)
                .map(|(p, &i)| (p.name.clone(), p.values[i].clone()))
                .collect();
            if self.admits(&point)? {
                out.push(point);
            } else {
                excluded += 1;
            }
            for k in (0..idx.len()).rev() {
                idx[k] += 1;
                if idx[k] < self.params[k].values.len() {
                    break;
                }
                idx[k] = 0;
            }
        }
        Ok((out, excluded))
    }

    pub fn admits(&self, point: &BTreeMap<String, String>) -> Result<bool> {
        for c in &self.constraints {
            if !c.eval(point)?.truthy() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `NAME=VALUE,...` in the order of the parameters.
    pub fn label(&self, point: &BTreeMap<String, String>) -> String {
        self.params
            .iter()
            .filter_map(|p| point.get(&p.name).map(|v| format!("{}={v}", p.name)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The template with every `{NAME}` replaced.
    pub fn substitute(&self, template: &str, point: &BTreeMap<String, String>) -> String {
        let mut s = template.to_string();
        for (n, v) in point {
            s = s.replace(&format!("{{{n}}}"), v);
        }
        s
    }
}

/// A space file's text: a `[params]` table (`NAME = [..]`, `NAME = "a..b
/// step s"`, `NAME = 4`) and `constraints = ["..."]`, a small TOML subset.
pub fn parse_space_text(text: &str) -> std::result::Result<(Vec<Param>, Vec<String>), String> {
    let mut params = Vec::new();
    let mut constraints = Vec::new();
    let mut section = String::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((n, raw)) = lines.next() {
        let line = strip_comment(raw).trim().to_string();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('[') && !line.contains('=') {
            section = line
                .trim_start_matches('[')
                .trim_end_matches(']')
                .trim()
                .to_string();
            if !matches!(section.as_str(), "params" | "constraints") {
                return Err(format!(
                    "line {}: unknown table [{section}] (params, constraints)",
                    n + 1
                ));
            }
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("line {}: expected KEY = VALUE", n + 1))?;
        let key = k.trim().trim_matches('"').to_string();
        let mut value = v.trim().to_string();
        // Arrays may span lines.
        while value.starts_with('[') && !balanced(&value) {
            let Some((_, more)) = lines.next() else {
                return Err(format!("line {}: unclosed [", n + 1));
            };
            value.push(' ');
            value.push_str(strip_comment(more).trim());
        }
        let items = parse_value(&value).map_err(|e| format!("line {}: {e}", n + 1))?;
        match (section.as_str(), key.as_str()) {
            ("params", name) => {
                check_name(name).map_err(|e| format!("line {}: {e}", n + 1))?;
                let mut values = Vec::new();
                for (text, quoted) in items {
                    let vs = if quoted {
                        parse_values(name, &text)
                    } else {
                        check_value(name, &text).map(|_| vec![text])
                    };
                    values.extend(vs.map_err(|e| format!("line {}: {e}", n + 1))?);
                }
                params.push(Param {
                    name: name.to_string(),
                    values,
                });
            }
            ("" | "constraints", "constraints" | "constraint" | "rules") => {
                constraints.extend(items.into_iter().map(|(t, _)| t));
            }
            (s, k) => {
                return Err(format!(
                "line {}: unknown key {k}{} (params go under [params]; constraints = [\"...\"])",
                n + 1,
                if s.is_empty() {
                    String::new()
                } else {
                    format!(" in [{s}]")
                }
            ))
            }
        }
    }
    Ok((params, constraints))
}

fn strip_comment(line: &str) -> &str {
    let mut in_str = None;
    for (i, c) in line.char_indices() {
        match (c, in_str) {
            ('"' | '\'', None) => in_str = Some(c),
            (c, Some(q)) if c == q => in_str = None,
            ('#', None) => return &line[..i],
            _ => {}
        }
    }
    line
}

fn balanced(s: &str) -> bool {
    let mut depth = 0i32;
    let mut in_str = None;
    for c in s.chars() {
        match (c, in_str) {
            ('"' | '\'', None) => in_str = Some(c),
            (c, Some(q)) if c == q => in_str = None,
            ('[', None) => depth += 1,
            (']', None) => depth -= 1,
            _ => {}
        }
    }
    depth <= 0
}

/// A value: `[a, "b", 3]`, `"text"` or a bare number/word; items with
/// whether they were quoted.
fn parse_value(v: &str) -> std::result::Result<Vec<(String, bool)>, String> {
    let v = v.trim();
    let inner = match v.strip_prefix('[') {
        Some(rest) => rest
            .strip_suffix(']')
            .ok_or("an array must end with ]")?
            .to_string(),
        None => v.to_string(),
    };
    let mut items = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut in_str: Option<char> = None;
    for c in inner.chars() {
        match (c, in_str) {
            ('"' | '\'', None) => {
                in_str = Some(c);
                quoted = true;
            }
            (c, Some(q)) if c == q => in_str = None,
            (',', None) => {
                if !cur.trim().is_empty() || quoted {
                    items.push((cur.trim().to_string(), quoted));
                }
                cur.clear();
                quoted = false;
            }
            (c, _) => cur.push(c),
        }
    }
    if in_str.is_some() {
        return Err("an unclosed string".into());
    }
    if !cur.trim().is_empty() || quoted {
        items.push((cur.trim().to_string(), quoted));
    }
    if items.is_empty() {
        return Err("no values".into());
    }
    Ok(items)
}

/// A constraint's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Num(f64),
    Str(String),
    Bool(bool),
}

impl Value {
    pub fn truthy(&self) -> bool {
        match self {
            Value::Num(x) => *x != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Bool(b) => *b,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Num(f64),
    Str(String),
    Var(String),
    Neg(Box<Node>),
    Not(Box<Node>),
    Bin(Op, Box<Node>, Box<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

/// A constraint: `+ - * / %`, comparisons, `and` / `or` / `not` (also
/// `&& || !`), parentheses, numbers, quoted strings and parameter names.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub text: String,
    root: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Str(String),
    Ident(String),
    Op(&'static str),
    LParen,
    RParen,
}

fn lex(s: &str) -> std::result::Result<Vec<Tok>, String> {
    let cs: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || (c == '.' && cs.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let st = i;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '.') {
                // 1e-3: a sign right after the exponent belongs to the number.
                i += 1;
                if i < cs.len() && (cs[i] == '-' || cs[i] == '+') && matches!(cs[i - 1], 'e' | 'E')
                {
                    i += 1;
                }
            }
            let t: String = cs[st..i].iter().collect();
            out.push(Tok::Num(
                t.parse().map_err(|_| format!("{t:?} is not a number"))?,
            ));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let st = i;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            let w: String = cs[st..i].iter().collect();
            out.push(match w.as_str() {
                "and" => Tok::Op("and"),
                "or" => Tok::Op("or"),
                "not" => Tok::Op("not"),
                "true" | "True" => Tok::Num(1.0),
                "false" | "False" => Tok::Num(0.0),
                _ => Tok::Ident(w),
            });
        } else if c == '"' || c == '\'' {
            let st = i + 1;
            i += 1;
            while i < cs.len() && cs[i] != c {
                i += 1;
            }
            if i >= cs.len() {
                return Err("an unclosed string".into());
            }
            out.push(Tok::Str(cs[st..i].iter().collect()));
            i += 1;
        } else if c == '(' {
            out.push(Tok::LParen);
            i += 1;
        } else if c == ')' {
            out.push(Tok::RParen);
            i += 1;
        } else {
            let two: String = cs[i..(i + 2).min(cs.len())].iter().collect();
            let op = match two.as_str() {
                "<=" => Some("<="),
                ">=" => Some(">="),
                "==" => Some("=="),
                "!=" => Some("!="),
                "&&" => Some("and"),
                "||" => Some("or"),
                _ => None,
            };
            if let Some(op) = op {
                out.push(Tok::Op(op));
                i += 2;
                continue;
            }
            let op = match c {
                '+' => "+",
                '-' => "-",
                '*' => "*",
                '/' => "/",
                '%' => "%",
                '<' => "<",
                '>' => ">",
                '!' => "not",
                '=' => "==",
                _ => return Err(format!("unexpected {c:?}")),
            };
            out.push(Tok::Op(op));
            i += 1;
        }
    }
    Ok(out)
}

struct Parser<'a> {
    toks: Vec<Tok>,
    at: usize,
    names: &'a [&'a str],
    depth: usize,
}

impl Parser<'_> {
    fn peek_op(&self) -> Option<&'static str> {
        match self.toks.get(self.at) {
            Some(Tok::Op(o)) => Some(o),
            _ => None,
        }
    }

    fn binary(
        &mut self,
        ops: &[(&str, Op)],
        next: fn(&mut Self) -> std::result::Result<Node, String>,
    ) -> std::result::Result<Node, String> {
        let mut left = next(self)?;
        while let Some(op) = self
            .peek_op()
            .and_then(|o| ops.iter().find(|(s, _)| *s == o).map(|(_, op)| *op))
        {
            self.at += 1;
            let right = next(self)?;
            left = Node::Bin(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn or(&mut self) -> std::result::Result<Node, String> {
        self.binary(&[("or", Op::Or)], Self::and)
    }

    fn and(&mut self) -> std::result::Result<Node, String> {
        self.binary(&[("and", Op::And)], Self::not)
    }

    fn not(&mut self) -> std::result::Result<Node, String> {
        if self.peek_op() == Some("not") {
            self.at += 1;
            return Ok(Node::Not(Box::new(self.nested(Self::not)?)));
        }
        self.cmp()
    }

    fn cmp(&mut self) -> std::result::Result<Node, String> {
        self.binary(
            &[
                ("<", Op::Lt),
                ("<=", Op::Le),
                (">", Op::Gt),
                (">=", Op::Ge),
                ("==", Op::Eq),
                ("!=", Op::Ne),
            ],
            Self::sum,
        )
    }

    fn sum(&mut self) -> std::result::Result<Node, String> {
        self.binary(&[("+", Op::Add), ("-", Op::Sub)], Self::product)
    }

    fn product(&mut self) -> std::result::Result<Node, String> {
        self.binary(
            &[("*", Op::Mul), ("/", Op::Div), ("%", Op::Mod)],
            Self::unary,
        )
    }

    fn nested(
        &mut self,
        f: fn(&mut Self) -> std::result::Result<Node, String>,
    ) -> std::result::Result<Node, String> {
        self.depth += 1;
        if self.depth > 64 {
            return Err("nested too deeply".into());
        }
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn unary(&mut self) -> std::result::Result<Node, String> {
        if self.peek_op() == Some("-") {
            self.at += 1;
            return Ok(Node::Neg(Box::new(self.nested(Self::unary)?)));
        }
        if self.peek_op() == Some("+") {
            self.at += 1;
            return self.nested(Self::unary);
        }
        let tok = self.toks.get(self.at).cloned();
        self.at += 1;
        match tok {
            Some(Tok::Num(x)) => Ok(Node::Num(x)),
            Some(Tok::Str(s)) => Ok(Node::Str(s)),
            Some(Tok::Ident(n)) => {
                if self.names.contains(&n.as_str()) {
                    Ok(Node::Var(n))
                } else {
                    Err(format!(
                        "{n} is not a parameter ({})",
                        self.names.join(", ")
                    ))
                }
            }
            Some(Tok::LParen) => {
                let e = self.nested(Self::or)?;
                match self.toks.get(self.at) {
                    Some(Tok::RParen) => {
                        self.at += 1;
                        Ok(e)
                    }
                    _ => Err("a ( without its )".into()),
                }
            }
            Some(t) => Err(format!("unexpected {t:?}")),
            None => Err("it ends too early".into()),
        }
    }
}

/// The most tokens a constraint may have (see [`Expr::parse`]).
pub const MAX_CONSTRAINT_TOKENS: usize = 1000;

impl Expr {
    /// Parse `text`; only `names` may appear as variables.
    pub fn parse(text: &str, names: &[&str]) -> Result<Expr> {
        let bad = |why: String| SpaceError(format!("constraint {text:?}: {why}"));
        let toks = lex(text).map_err(bad)?;
        // Evaluating (and dropping) the tree recurses once per operator
        // of a chain: a 40,000-term sum overflowed the stack.
        if toks.len() > MAX_CONSTRAINT_TOKENS {
            return Err(bad(format!(
                "{} tokens; a constraint has at most {MAX_CONSTRAINT_TOKENS}",
                toks.len()
            )));
        }
        let mut p = Parser {
            toks,
            at: 0,
            names,
            depth: 0,
        };
        let root = p.or().map_err(bad)?;
        if p.at < p.toks.len() {
            return Err(bad(format!("unexpected {:?}", p.toks[p.at])));
        }
        Ok(Expr {
            text: text.to_string(),
            root,
        })
    }

    pub fn eval(&self, vars: &BTreeMap<String, String>) -> Result<Value> {
        eval(&self.root, vars)
            .map_err(|e| SpaceError(format!("constraint {:?} at {vars:?}: {e}", self.text)))
    }
}

fn num(v: &Value) -> std::result::Result<f64, String> {
    match v {
        Value::Num(x) => Ok(*x),
        Value::Bool(b) => Ok(f64::from(u8::from(*b))),
        Value::Str(s) => Err(format!("{s:?} is not a number")),
    }
}

fn eval(n: &Node, vars: &BTreeMap<String, String>) -> std::result::Result<Value, String> {
    Ok(match n {
        Node::Num(x) => Value::Num(*x),
        Node::Str(s) => Value::Str(s.clone()),
        Node::Var(name) => {
            let v = vars
                .get(name)
                .ok_or_else(|| format!("{name} has no value"))?;
            match v.parse::<f64>() {
                Ok(x) if x.is_finite() => Value::Num(x),
                _ => Value::Str(v.clone()),
            }
        }
        Node::Neg(a) => Value::Num(-num(&eval(a, vars)?)?),
        Node::Not(a) => Value::Bool(!eval(a, vars)?.truthy()),
        Node::Bin(Op::And, a, b) => Value::Bool(eval(a, vars)?.truthy() && eval(b, vars)?.truthy()),
        Node::Bin(Op::Or, a, b) => Value::Bool(eval(a, vars)?.truthy() || eval(b, vars)?.truthy()),
        Node::Bin(op, a, b) => {
            let (x, y) = (eval(a, vars)?, eval(b, vars)?);
            match op {
                Op::Eq => Value::Bool(equal(&x, &y)),
                Op::Ne => Value::Bool(!equal(&x, &y)),
                _ => {
                    let (x, y) = (num(&x)?, num(&y)?);
                    match op {
                        Op::Add => Value::Num(x + y),
                        Op::Sub => Value::Num(x - y),
                        Op::Mul => Value::Num(x * y),
                        Op::Div | Op::Mod if y == 0.0 => return Err("division by zero".into()),
                        Op::Div => Value::Num(x / y),
                        Op::Mod => Value::Num(x % y),
                        Op::Lt => Value::Bool(x < y),
                        Op::Le => Value::Bool(x <= y),
                        Op::Gt => Value::Bool(x > y),
                        Op::Ge => Value::Bool(x >= y),
                        Op::Eq | Op::Ne | Op::And | Op::Or => unreachable!("handled above"),
                    }
                }
            }
        }
    })
}

fn equal(x: &Value, y: &Value) -> bool {
    match (x, y) {
        (Value::Str(a), Value::Str(b)) => a == b,
        (Value::Str(_), _) | (_, Value::Str(_)) => false,
        _ => num(x).ok() == num(y).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// #39: a space whose value counts multiply past 2^64 said it had
    /// exactly 18446744073709551615 points (the saturated count).
    #[test]
    fn a_space_past_usize_says_more_than_not_a_saturated_count() {
        let params: Vec<Param> = (0..21)
            .map(|i| parse_param(&format!("P{i}=0..9")).unwrap())
            .collect();
        let space = Space::new(params, &[]).unwrap();
        assert_eq!(space.size_checked(), None);
        let e = space.points(1000).unwrap_err().to_string();
        assert!(
            e.contains(&format!("more than {} points", usize::MAX)),
            "{e}"
        );
        let small = Space::new(vec![parse_param("A=0..9").unwrap()], &[]).unwrap();
        assert_eq!(small.size_checked(), Some(10));
        let e = small.points(5).unwrap_err().to_string();
        assert!(e.contains("has 10 points, more than 5"), "{e}");
    }

    #[test]
    fn values_lists_and_ranges() {
        assert_eq!(
            parse_values("B", "64,128,256").unwrap(),
            ["64", "128", "256"]
        );
        assert_eq!(
            parse_values("B", "64..256 step 64").unwrap(),
            ["64", "128", "192", "256"]
        );
        assert_eq!(
            parse_values("B", "16..256 x2").unwrap(),
            ["16", "32", "64", "128", "256"]
        );
        assert_eq!(parse_values("S", "2..4").unwrap(), ["2", "3", "4"]);
        assert_eq!(
            parse_values("F", "0.5..1.5 step 0.5").unwrap(),
            ["0.5", "1", "1.5"]
        );
        assert_eq!(
            parse_values("M", "fast,slow,fast").unwrap(),
            ["fast", "slow"]
        );
        for bad in [
            "",
            "4..2",
            "1..8 step 0",
            "1..8 x1",
            "a;b",
            "1..1000000",
            "x y",
        ] {
            assert!(parse_values("B", bad).is_err(), "{bad}");
        }
        assert!(parse_param("B=1,2").is_ok());
        assert!(parse_param("1B=1").is_err());
        assert!(parse_param("CHECK=1").is_err());
    }

    #[test]
    fn constraints_evaluate_without_eval() {
        let names = ["BLOCK", "WARPS", "MODE"];
        let e = |s: &str| Expr::parse(s, &names).unwrap();
        let p = point(&[("BLOCK", "256"), ("WARPS", "8"), ("MODE", "fast")]);
        assert!(e("BLOCK * WARPS <= 2048").eval(&p).unwrap().truthy());
        assert!(!e("BLOCK * WARPS < 2048").eval(&p).unwrap().truthy());
        assert!(e("BLOCK % 64 == 0 and WARPS >= 4")
            .eval(&p)
            .unwrap()
            .truthy());
        assert!(e("BLOCK / WARPS == 32 || MODE == 'slow'")
            .eval(&p)
            .unwrap()
            .truthy());
        assert!(e("not (MODE == \"slow\")").eval(&p).unwrap().truthy());
        assert!(e("-BLOCK + 2 * (WARPS + 1) < 0").eval(&p).unwrap().truthy());
        assert!(e("1e3 < BLOCK * 4").eval(&p).unwrap().truthy());
        assert!(e("!(WARPS != 8)").eval(&p).unwrap().truthy());
        for bad in [
            "BLOCK * ",
            "(BLOCK",
            "OTHER > 1",
            "BLOCK > 1 )",
            "__import__('os')",
            "BLOCK ; 1",
            "'open",
        ] {
            assert!(Expr::parse(bad, &names).is_err(), "{bad}");
        }
        let deep = format!("{}1{}", "(".repeat(500), ")".repeat(500));
        assert!(Expr::parse(&deep, &names).is_err());
        assert!(e("BLOCK / (WARPS - 8) > 1").eval(&p).is_err());
        assert!(e("MODE * 2 > 1").eval(&p).is_err());
    }

    #[test]
    fn points_respect_constraints_in_order() {
        let s = Space::new(
            vec![
                parse_param("B=64,128,256").unwrap(),
                parse_param("W=4,8").unwrap(),
            ],
            &["B * W <= 1024".to_string()],
        )
        .unwrap();
        let (pts, excluded) = s.points(100).unwrap();
        let labels: Vec<String> = pts.iter().map(|p| s.label(p)).collect();
        assert_eq!(
            labels,
            [
                "B=64,W=4",
                "B=64,W=8",
                "B=128,W=4",
                "B=128,W=8",
                "B=256,W=4"
            ]
        );
        assert_eq!(excluded, 1);
        assert!(s.points(3).is_err());
        assert_eq!(s.substitute("./k {B} {W} {B}", &pts[0]), "./k 64 4 64");
    }

    #[test]
    fn space_files_parse() {
        let text = r#"
# a matmul space
constraints = ["BLOCK_M * BLOCK_N <= 128 * 128",
           "WARPS <= 8"]  # trailing comment
[params]
BLOCK_M = [64, 128]
BLOCK_N = "32..128 x2"
WARPS = 4
MODE = ["a", 'b']
"#;
        let (params, constraints) = parse_space_text(text).unwrap();
        assert_eq!(params.len(), 4);
        assert_eq!(params[1].values, ["32", "64", "128"]);
        assert_eq!(params[2].values, ["4"]);
        assert_eq!(params[3].values, ["a", "b"]);
        assert_eq!(constraints.len(), 2);
        assert!(parse_space_text("[other]\nx = 1").is_err());
        assert!(parse_space_text("[params]\nB = [1, 2").is_err());
        assert!(parse_space_text("B = 1").is_err());
        assert!(parse_space_text("[params]\nB = [\"1;rm\"]").is_err());
    }
}
