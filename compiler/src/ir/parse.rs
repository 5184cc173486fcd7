//! The text form of a graph: parser (the inverse of `ir::print`; the format is described
//! there).
//!
//! The parser accepts any value names (`%x`, `%v17`, `%c3`), each declared once and
//! before use; the graph outputs may name any value. Every attribute the printer writes
//! is required (no defaults), except `output_shape` of forward window ops and `conv`,
//! which is empty when absent. A constant whose data is elided gets all-zero (false)
//! data of its type: such a graph has the right structure but not the model's values.
//! `;` comments and whitespace (newlines included) are insignificant.
//!
//! Errors carry `line:col`. The parser checks syntax and name resolution only; types
//! are taken as written (run `ir::verify` to check them against `ir::infer`).

use super::graph::{ConstId, Constant, Graph, Node, NodeId, Value, ValueDef, ValueId};
use super::op::{
    BinaryOp, Border, ConvAttrs, Op, ReduceOp, ResampleMethod, RoiPoolOp, UnaryOp, WindowAttrs,
};
use super::print::TEXT_VERSION;
use super::tensor::{Tensor, TensorData};
use super::types::{DType, Dim, Layout, TensorType};
use std::collections::HashMap;

/// A syntax or name error at a 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

/// Parses the text form of a graph.
pub fn parse(text: &str) -> Result<Graph, ParseError> {
    let tokens = lex(text)?;
    Parser {
        toks: tokens,
        pos: 0,
        values: HashMap::new(),
        g: Graph::default(),
    }
    .graph()
}

// ---------------------------------------------------------------------------------------
// Lexer
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Value(String),
    Ident(String),
    Number(String),
    Str(String),
    Punct(char),
    Arrow,
    Eof,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Value(s) => format!("`{s}`"),
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Number(s) => format!("number `{s}`"),
            Tok::Str(s) => format!("string \"{s}\""),
            Tok::Punct(c) => format!("`{c}`"),
            Tok::Arrow => "`->`".to_string(),
            Tok::Eof => "end of input".to_string(),
        }
    }
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
    col: usize,
}

fn lex(text: &str) -> Result<Vec<Token>, ParseError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1usize, 1usize);
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        let (tl, tc) = (line, col);
        let start = i;
        let tok = if c == '\n' {
            i += 1;
            line += 1;
            col = 1;
            continue;
        } else if c.is_whitespace() {
            i += 1;
            col += 1;
            continue;
        } else if c == ';' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        } else if c == '%' {
            i += 1;
            while i < chars.len() && is_word(chars[i]) {
                i += 1;
            }
            if i == start + 1 {
                return Err(ParseError {
                    line: tl,
                    col: tc,
                    message: "expected a value name after `%`".into(),
                });
            }
            Tok::Value(chars[start..i].iter().collect())
        } else if c.is_ascii_alphabetic() || c == '_' {
            // `-` inside words spells `reflect-even`.
            while i < chars.len()
                && (is_word(chars[i])
                    || (chars[i] == '-'
                        && chars.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic())))
            {
                i += 1;
            }
            Tok::Ident(chars[start..i].iter().collect())
        } else if c == '-' && chars.get(i + 1) == Some(&'>') {
            i += 2;
            Tok::Arrow
        } else if c.is_ascii_digit() || c == '-' || c == '+' || c == '.' {
            i += 1;
            while i < chars.len() {
                let d = chars[i];
                let exp_sign = (d == '-' || d == '+')
                    && matches!(chars[i - 1], 'e' | 'E')
                    && chars[start..i].iter().any(|c| c.is_ascii_digit());
                if d.is_ascii_alphanumeric() || d == '.' || exp_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            Tok::Number(chars[start..i].iter().collect())
        } else if c == '"' {
            i += 1;
            let mut s = String::new();
            loop {
                match chars.get(i) {
                    None | Some('\n') => {
                        return Err(ParseError {
                            line: tl,
                            col: tc,
                            message: "unterminated string".into(),
                        });
                    }
                    Some('"') => {
                        i += 1;
                        break;
                    }
                    Some('\\') => {
                        match chars.get(i + 1) {
                            Some('n') => s.push('\n'),
                            Some(&e @ ('"' | '\\')) => s.push(e),
                            _ => {
                                return Err(ParseError {
                                    line: tl,
                                    col: tc + (i - start),
                                    message: "unknown escape in string (only \\\" \\\\ \\n)".into(),
                                });
                            }
                        }
                        i += 2;
                    }
                    Some(&ch) => {
                        s.push(ch);
                        i += 1;
                    }
                }
            }
            Tok::Str(s)
        } else if "()[]{},:=?".contains(c) {
            i += 1;
            Tok::Punct(c)
        } else {
            return Err(ParseError {
                line: tl,
                col: tc,
                message: format!("unexpected character `{c}`"),
            });
        };
        col += i - start;
        out.push(Token {
            tok,
            line: tl,
            col: tc,
        });
    }
    out.push(Token {
        tok: Tok::Eof,
        line,
        col,
    });
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Attribute values
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Attr {
    Word(String),
    Number(String),
    List(Vec<Attr>),
    Pair(Box<Attr>, Box<Attr>),
}

struct Attrs {
    items: HashMap<String, (Attr, usize, usize)>,
    at: (usize, usize),
}

fn perr<T>(at: (usize, usize), message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        line: at.0,
        col: at.1,
        message: message.into(),
    })
}

impl Attrs {
    fn take(&mut self, name: &str) -> Result<(Attr, (usize, usize)), ParseError> {
        match self.items.remove(name) {
            Some((a, l, c)) => Ok((a, (l, c))),
            None => perr(self.at, format!("missing attribute `{name}`")),
        }
    }
    fn usize(&mut self, name: &str) -> Result<usize, ParseError> {
        let (a, at) = self.take(name)?;
        as_usize(&a, at, name)
    }
    fn i64(&mut self, name: &str) -> Result<i64, ParseError> {
        let (a, at) = self.take(name)?;
        as_i64(&a, at, name)
    }
    fn f32(&mut self, name: &str) -> Result<f32, ParseError> {
        let (a, at) = self.take(name)?;
        as_f32(&a, at, name)
    }
    fn bool(&mut self, name: &str) -> Result<bool, ParseError> {
        let (a, at) = self.take(name)?;
        match a {
            Attr::Word(w) if w == "true" => Ok(true),
            Attr::Word(w) if w == "false" => Ok(false),
            _ => perr(at, format!("attribute `{name}` must be true or false")),
        }
    }
    fn word(&mut self, name: &str) -> Result<(String, (usize, usize)), ParseError> {
        let (a, at) = self.take(name)?;
        match a {
            Attr::Word(w) => Ok((w, at)),
            _ => perr(at, format!("attribute `{name}` must be a word")),
        }
    }
    fn border(&mut self, name: &str) -> Result<Border, ParseError> {
        let (w, at) = self.word(name)?;
        Border::from_mnemonic(&w).map_or_else(|| perr(at, format!("unknown border `{w}`")), Ok)
    }
    fn method(&mut self, name: &str) -> Result<ResampleMethod, ParseError> {
        let (w, at) = self.word(name)?;
        match w.as_str() {
            "symmetric" => Ok(ResampleMethod::Symmetric),
            "asymmetric" => Ok(ResampleMethod::Asymmetric),
            "aligned" => Ok(ResampleMethod::Aligned),
            _ => perr(at, format!("unknown method `{w}`")),
        }
    }
    fn list(&mut self, name: &str) -> Result<(Vec<Attr>, (usize, usize)), ParseError> {
        let (a, at) = self.take(name)?;
        match a {
            Attr::List(v) => Ok((v, at)),
            _ => perr(at, format!("attribute `{name}` must be a list")),
        }
    }
    fn usizes(&mut self, name: &str) -> Result<Vec<usize>, ParseError> {
        let (v, at) = self.list(name)?;
        v.iter().map(|a| as_usize(a, at, name)).collect()
    }
    fn usizes_or_empty(&mut self, name: &str) -> Result<Vec<usize>, ParseError> {
        if self.items.contains_key(name) {
            self.usizes(name)
        } else {
            Ok(vec![])
        }
    }
    fn i64s(&mut self, name: &str) -> Result<Vec<i64>, ParseError> {
        let (v, at) = self.list(name)?;
        v.iter().map(|a| as_i64(a, at, name)).collect()
    }
    fn pads(&mut self, name: &str) -> Result<Vec<(usize, usize)>, ParseError> {
        let (v, at) = self.list(name)?;
        v.iter()
            .map(|a| match a {
                Attr::Pair(x, y) => Ok((as_usize(x, at, name)?, as_usize(y, at, name)?)),
                _ => perr(
                    at,
                    format!("attribute `{name}` must be a list of (front,back) pairs"),
                ),
            })
            .collect()
    }
    fn done(self) -> Result<(), ParseError> {
        let mut left: Vec<(&String, &(Attr, usize, usize))> = self.items.iter().collect();
        left.sort_by_key(|(_, (_, l, c))| (*l, *c));
        match left.first() {
            Some((name, (_, l, c))) => {
                perr((*l, *c), format!("unknown attribute `{name}` for this op"))
            }
            None => Ok(()),
        }
    }
}

fn as_i64(a: &Attr, at: (usize, usize), name: &str) -> Result<i64, ParseError> {
    match a {
        Attr::Number(n) => n.parse().map_or_else(
            |_| {
                perr(
                    at,
                    format!("attribute `{name}` must hold integers, got `{n}`"),
                )
            },
            Ok,
        ),
        _ => perr(at, format!("attribute `{name}` must hold integers")),
    }
}

fn as_usize(a: &Attr, at: (usize, usize), name: &str) -> Result<usize, ParseError> {
    let n = as_i64(a, at, name)?;
    usize::try_from(n).map_or_else(
        |_| {
            perr(
                at,
                format!("attribute `{name}` must not be negative, got {n}"),
            )
        },
        Ok,
    )
}

fn as_f32(a: &Attr, at: (usize, usize), name: &str) -> Result<f32, ParseError> {
    let s = match a {
        Attr::Number(n) | Attr::Word(n) => n,
        _ => return perr(at, format!("attribute `{name}` must be a number")),
    };
    s.parse().map_or_else(
        |_| {
            perr(
                at,
                format!("attribute `{name}` must be a number, got `{s}`"),
            )
        },
        Ok,
    )
}

/// Every op with placeholder attributes, to map mnemonics back (the names live in
/// `Op::mnemonic`, the one table).
fn prototypes() -> Vec<Op> {
    use UnaryOp::*;
    let mut v: Vec<Op> = [
        Copy,
        Neg,
        Rcp,
        Exp,
        Log,
        Sin,
        Cos,
        Tan,
        Asin,
        Acos,
        Atan,
        Sinh,
        Cosh,
        Tanh,
        Asinh,
        Acosh,
        Atanh,
        Abs,
        Sign,
        Not,
        Floor,
        Ceil,
        Round,
        Sqr,
        Sqrt,
        Rsqr,
        Rsqrt,
        Log2,
        Relu,
        Sigmoid,
        Softplus,
        Silu,
        Gelu,
        Elu { alpha: 0.0 },
        Selu {
            alpha: 0.0,
            lambda: 0.0,
        },
        LeakyRelu { alpha: 0.0 },
    ]
    .into_iter()
    .map(Op::Unary)
    .collect();
    use BinaryOp as B;
    v.extend(
        [
            B::Add,
            B::Sub,
            B::Mul,
            B::Div,
            B::Pow,
            B::Min,
            B::Max,
            B::Lt,
            B::Gt,
            B::Le,
            B::Ge,
            B::Eq,
            B::Ne,
            B::And,
            B::Or,
        ]
        .into_iter()
        .map(Op::Binary),
    );
    let conv = ConvAttrs {
        border: Border::Constant,
        padding: vec![],
        stride: vec![],
        dilation: vec![],
        groups: 1,
        output_shape: vec![],
    };
    let win = WindowAttrs {
        size: vec![],
        border: Border::Constant,
        padding: vec![],
        stride: vec![],
        dilation: vec![],
        output_shape: vec![],
    };
    v.extend([
        Op::Select,
        Op::Clamp,
        Op::Conv(conv.clone()),
        Op::Deconv(conv),
        Op::Box {
            window: win.clone(),
            normalize: false,
        },
        Op::Debox {
            window: win.clone(),
            normalize: false,
        },
        Op::ArgmaxPool(win.clone()),
        Op::Sample(win.clone()),
        Op::Desample(win.clone()),
        Op::MaxPool(win),
        Op::MultilinearUpsample {
            factor: vec![],
            method: ResampleMethod::Symmetric,
            border: Border::Constant,
        },
        Op::MatMul {
            transpose_a: false,
            transpose_b: false,
        },
        Op::Linear,
        Op::Softmax { axes: vec![] },
        Op::BatchNorm { epsilon: 0.0 },
        Op::Reshape {
            shape: vec![],
            axis_start: 0,
            axis_count: -1,
        },
        Op::Squeeze { axes: vec![] },
        Op::Unsqueeze { axes: vec![] },
        Op::Transpose { axes: vec![] },
        Op::Split {
            axis: 0,
            ratios: vec![],
        },
        Op::Concat { axis: 0 },
        Op::Stack { axis: 0 },
        Op::Unstack { axis: 0 },
        Op::Slice {
            axes: vec![],
            begin: vec![],
            end: vec![],
            stride: vec![],
        },
        Op::Tile { repeats: vec![] },
        Op::Pad {
            padding: vec![],
            border: Border::Constant,
            value: 0.0,
        },
        Op::Gather { axis: 0 },
        Op::Cast { to: DType::F32 },
        Op::RoiPool {
            op: RoiPoolOp::Avg,
            output_size: vec![],
        },
        Op::RoiPool {
            op: RoiPoolOp::Max,
            output_size: vec![],
        },
        Op::RoiResample {
            output_size: vec![],
            method: ResampleMethod::Symmetric,
        },
    ]);
    use ReduceOp as R;
    v.extend(
        [
            R::Sum,
            R::Mean,
            R::Max,
            R::Min,
            R::Any,
            R::All,
            R::ArgMax,
            R::ArgMin,
        ]
        .into_iter()
        .map(|op| Op::Reduce { op, axes: vec![] }),
    );
    v
}

/// Fills a prototype's attributes from the parsed ones.
fn build_op(proto: Op, mut a: Attrs) -> Result<Op, ParseError> {
    let conv = |a: &mut Attrs| -> Result<ConvAttrs, ParseError> {
        Ok(ConvAttrs {
            border: a.border("border")?,
            padding: a.pads("padding")?,
            stride: a.usizes("stride")?,
            dilation: a.usizes("dilation")?,
            output_shape: a.usizes_or_empty("output_shape")?,
            groups: a.usize("groups")?,
        })
    };
    let window = |a: &mut Attrs| -> Result<WindowAttrs, ParseError> {
        Ok(WindowAttrs {
            size: a.usizes("size")?,
            border: a.border("border")?,
            padding: a.pads("padding")?,
            stride: a.usizes("stride")?,
            dilation: a.usizes("dilation")?,
            output_shape: a.usizes_or_empty("output_shape")?,
        })
    };
    let op = match proto {
        Op::Unary(UnaryOp::Elu { .. }) => Op::Unary(UnaryOp::Elu {
            alpha: a.f32("alpha")?,
        }),
        Op::Unary(UnaryOp::LeakyRelu { .. }) => Op::Unary(UnaryOp::LeakyRelu {
            alpha: a.f32("alpha")?,
        }),
        Op::Unary(UnaryOp::Selu { .. }) => Op::Unary(UnaryOp::Selu {
            alpha: a.f32("alpha")?,
            lambda: a.f32("lambda")?,
        }),
        p @ (Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Clamp | Op::Linear) => p,
        Op::Conv(_) => Op::Conv(conv(&mut a)?),
        Op::Deconv(_) => Op::Deconv(conv(&mut a)?),
        Op::Box { .. } => Op::Box {
            window: window(&mut a)?,
            normalize: a.bool("normalize")?,
        },
        Op::Debox { .. } => Op::Debox {
            window: window(&mut a)?,
            normalize: a.bool("normalize")?,
        },
        Op::ArgmaxPool(_) => Op::ArgmaxPool(window(&mut a)?),
        Op::Sample(_) => Op::Sample(window(&mut a)?),
        Op::Desample(_) => Op::Desample(window(&mut a)?),
        Op::MaxPool(_) => Op::MaxPool(window(&mut a)?),
        Op::MultilinearUpsample { .. } => Op::MultilinearUpsample {
            factor: a.usizes("factor")?,
            method: a.method("method")?,
            border: a.border("border")?,
        },
        Op::Reduce { op, .. } => Op::Reduce {
            op,
            axes: a.usizes("axes")?,
        },
        Op::MatMul { .. } => Op::MatMul {
            transpose_a: a.bool("transposeA")?,
            transpose_b: a.bool("transposeB")?,
        },
        Op::Softmax { .. } => Op::Softmax {
            axes: a.usizes("axes")?,
        },
        Op::BatchNorm { .. } => Op::BatchNorm {
            epsilon: a.f32("epsilon")?,
        },
        Op::Reshape { .. } => Op::Reshape {
            shape: a.i64s("shape")?,
            axis_start: a.usize("axis_start")?,
            axis_count: a.i64("axis_count")?,
        },
        Op::Squeeze { .. } => Op::Squeeze {
            axes: a.usizes("axes")?,
        },
        Op::Unsqueeze { .. } => Op::Unsqueeze {
            axes: a.usizes("axes")?,
        },
        Op::Transpose { .. } => Op::Transpose {
            axes: a.usizes("axes")?,
        },
        Op::Split { .. } => Op::Split {
            axis: a.usize("axis")?,
            ratios: a.usizes("ratios")?,
        },
        Op::Concat { .. } => Op::Concat {
            axis: a.usize("axis")?,
        },
        Op::Stack { .. } => Op::Stack {
            axis: a.usize("axis")?,
        },
        Op::Unstack { .. } => Op::Unstack {
            axis: a.usize("axis")?,
        },
        Op::Gather { .. } => Op::Gather {
            axis: a.usize("axis")?,
        },
        Op::Slice { .. } => Op::Slice {
            axes: a.usizes("axes")?,
            begin: a.i64s("begin")?,
            end: a.i64s("end")?,
            stride: a.i64s("stride")?,
        },
        Op::Tile { .. } => Op::Tile {
            repeats: a.usizes("repeats")?,
        },
        Op::Pad { .. } => Op::Pad {
            padding: a.pads("padding")?,
            border: a.border("border")?,
            value: a.f32("value")?,
        },
        Op::Cast { .. } => {
            let (w, at) = a.word("to")?;
            Op::Cast {
                to: DType::from_mnemonic(&w)
                    .map_or_else(|| perr(at, format!("unknown dtype `{w}`")), Ok)?,
            }
        }
        Op::RoiPool { op, .. } => Op::RoiPool {
            op,
            output_size: a.usizes("output_size")?,
        },
        Op::RoiResample { .. } => Op::RoiResample {
            output_size: a.usizes("output_size")?,
            method: a.method("method")?,
        },
    };
    a.done()?;
    Ok(op)
}

// ---------------------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------------------

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    values: HashMap<String, ValueId>,
    g: Graph,
}

impl Parser {
    fn peek(&self) -> &Token {
        let last = self.toks.len().saturating_sub(1);
        &self.toks[self.pos.min(last)]
    }
    fn at(&self) -> (usize, usize) {
        let t = self.peek();
        (t.line, t.col)
    }
    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.toks.len() {
            self.pos += 1;
        }
        t
    }
    fn unexpected<T>(&self, what: &str) -> Result<T, ParseError> {
        perr(
            self.at(),
            format!("expected {what}, found {}", self.peek().tok.describe()),
        )
    }
    fn is_punct(&self, c: char) -> bool {
        self.peek().tok == Tok::Punct(c)
    }
    fn eat_punct(&mut self, c: char) -> bool {
        if self.is_punct(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect_punct(&mut self, c: char) -> Result<(), ParseError> {
        if self.eat_punct(c) {
            Ok(())
        } else {
            self.unexpected(&format!("`{c}`"))
        }
    }
    fn ident(&mut self, what: &str) -> Result<String, ParseError> {
        match &self.peek().tok {
            Tok::Ident(s) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => self.unexpected(what),
        }
    }
    fn number<T: std::str::FromStr>(&mut self, what: &str) -> Result<T, ParseError> {
        let at = self.at();
        match &self.peek().tok {
            Tok::Number(s) => match s.parse() {
                Ok(v) => {
                    self.pos += 1;
                    Ok(v)
                }
                Err(_) => perr(at, format!("expected {what}, found `{s}`")),
            },
            _ => self.unexpected(what),
        }
    }
    fn opt_string(&mut self) -> Option<String> {
        if let Tok::Str(s) = &self.peek().tok {
            let s = s.clone();
            self.pos += 1;
            Some(s)
        } else {
            None
        }
    }
    /// Comma-separated items up to `close` (the opening bracket already eaten).
    fn seq<T>(
        &mut self,
        close: char,
        mut item: impl FnMut(&mut Self) -> Result<T, ParseError>,
    ) -> Result<Vec<T>, ParseError> {
        let mut v = Vec::new();
        if self.eat_punct(close) {
            return Ok(v);
        }
        loop {
            v.push(item(self)?);
            if self.eat_punct(close) {
                return Ok(v);
            }
            if !self.eat_punct(',') {
                return self.unexpected(&format!("`,` or `{close}`"));
            }
        }
    }

    fn ty(&mut self) -> Result<TensorType, ParseError> {
        let at = self.at();
        let name = self.ident("a type such as f32[1,3]")?;
        let Some(dtype) = DType::from_mnemonic(&name) else {
            return perr(at, format!("unknown dtype `{name}` (f32, i32 or bool)"));
        };
        self.expect_punct('[')?;
        let dims = self.seq(']', |p| {
            if p.eat_punct('?') {
                Ok(Dim::Unknown)
            } else {
                p.number("an extent or `?`").map(Dim::Known)
            }
        })?;
        let mut layout = Layout::row_major(dims.len());
        if self.is_punct('{') {
            let lat = self.at();
            self.pos += 1;
            let m2m: Vec<usize> = self.seq('}', |p| p.number("a dimension index"))?;
            if m2m.len() != dims.len() {
                return perr(
                    lat,
                    format!(
                        "layout has {} entries but the type has rank {}",
                        m2m.len(),
                        dims.len()
                    ),
                );
            }
            layout = Layout {
                minor_to_major: m2m,
            };
        }
        Ok(TensorType {
            dtype,
            dims,
            layout,
        })
    }

    fn define(
        &mut self,
        name: String,
        at: (usize, usize),
        value: Value,
    ) -> Result<ValueId, ParseError> {
        if self.values.contains_key(&name) {
            return perr(at, format!("{name} is defined twice"));
        }
        let id = ValueId(self.g.values.len() as u32);
        self.g.values.push(value);
        self.values.insert(name, id);
        Ok(id)
    }

    fn use_value(&mut self) -> Result<ValueId, ParseError> {
        let at = self.at();
        match self.next().tok {
            Tok::Value(name) => match self.values.get(&name) {
                Some(&v) => Ok(v),
                None => perr(at, format!("{name} is not defined")),
            },
            t => perr(
                at,
                format!("expected a value such as %v0, found {}", t.describe()),
            ),
        }
    }

    /// `%name ["nnef-name"]: type`
    fn decl(&mut self) -> Result<(String, (usize, usize), Option<String>, TensorType), ParseError> {
        let at = self.at();
        let name = match self.next().tok {
            Tok::Value(n) => n,
            t => {
                return perr(
                    at,
                    format!("expected a value such as %v0, found {}", t.describe()),
                );
            }
        };
        let nnef_name = self.opt_string();
        self.expect_punct(':')?;
        let ty = self.ty()?;
        Ok((name, at, nnef_name, ty))
    }

    fn graph(mut self) -> Result<Graph, ParseError> {
        let at = self.at();
        if self.ident("`nnefir`")? != "nnefir" {
            return perr(at, "expected `nnefir` (the version line)");
        }
        let at = self.at();
        let version: u32 = self.number("the format version")?;
        if version != TEXT_VERSION {
            return perr(
                at,
                format!("unsupported text version {version} (this parser reads {TEXT_VERSION})"),
            );
        }
        let at = self.at();
        if self.ident("`graph`")? != "graph" {
            return perr(at, "expected `graph`");
        }
        self.g.name = match self.opt_string() {
            Some(s) => s,
            None => self.ident("the graph name")?,
        };
        self.expect_punct('(')?;
        let decls = self.seq(')', |p| p.decl())?;
        for (i, (name, at, nnef_name, ty)) in decls.into_iter().enumerate() {
            let v = self.define(
                name,
                at,
                Value {
                    ty,
                    def: ValueDef::Input(i),
                    name: nnef_name,
                },
            )?;
            self.g.inputs.push(v);
        }
        if self.next().tok != Tok::Arrow {
            self.pos -= 1;
            return self.unexpected("`->`");
        }
        self.expect_punct('(')?;
        let outputs: Vec<(String, (usize, usize))> = self.seq(')', |p| {
            let at = p.at();
            match p.next().tok {
                Tok::Value(n) => Ok((n, at)),
                t => perr(
                    at,
                    format!("expected a value such as %v0, found {}", t.describe()),
                ),
            }
        })?;
        self.expect_punct('{')?;
        while !self.eat_punct('}') {
            self.statement()?;
        }
        if self.peek().tok != Tok::Eof {
            return self.unexpected("end of input after `}`");
        }
        for (name, at) in outputs {
            match self.values.get(&name) {
                Some(&v) => self.g.outputs.push(v),
                None => return perr(at, format!("graph output {name} is not defined")),
            }
        }
        Ok(self.g)
    }

    fn statement(&mut self) -> Result<(), ParseError> {
        let mut decls = Vec::new();
        if self.eat_punct('(') {
            self.expect_punct(')')?;
        } else {
            loop {
                decls.push(self.decl()?);
                if !self.eat_punct(',') {
                    break;
                }
            }
        }
        self.expect_punct('=')?;
        let op_at = self.at();
        let mnemonic = self.ident("an op name")?;
        if mnemonic == "const" {
            return self.constant(decls, op_at);
        }
        let Some(proto) = prototypes().into_iter().find(|p| p.mnemonic() == mnemonic) else {
            return perr(op_at, format!("unknown op `{mnemonic}`"));
        };
        self.expect_punct('(')?;
        let inputs = self.seq(')', |p| p.use_value())?;
        let mut attrs = Attrs {
            items: HashMap::new(),
            at: op_at,
        };
        while let Tok::Ident(name) = &self.peek().tok {
            let name = name.clone();
            let at = self.at();
            self.pos += 1;
            self.expect_punct('=')?;
            let value = self.attr_value()?;
            if attrs
                .items
                .insert(name.clone(), (value, at.0, at.1))
                .is_some()
            {
                return perr(at, format!("attribute `{name}` given twice"));
            }
        }
        let op = build_op(proto, attrs)?;
        let node = NodeId(self.g.nodes.len() as u32);
        let mut outputs = Vec::new();
        for (i, (name, at, nnef_name, ty)) in decls.into_iter().enumerate() {
            outputs.push(self.define(
                name,
                at,
                Value {
                    ty,
                    def: ValueDef::Node(node, i),
                    name: nnef_name,
                },
            )?);
        }
        self.g.nodes.push(Node {
            op,
            inputs,
            outputs,
        });
        Ok(())
    }

    fn attr_value(&mut self) -> Result<Attr, ParseError> {
        let at = self.at();
        match self.next().tok {
            Tok::Ident(w) => Ok(Attr::Word(w)),
            Tok::Number(n) => Ok(Attr::Number(n)),
            Tok::Punct('[') => Ok(Attr::List(self.seq(']', |p| p.attr_value())?)),
            Tok::Punct('(') => {
                let a = self.attr_value()?;
                self.expect_punct(',')?;
                let b = self.attr_value()?;
                self.expect_punct(')')?;
                Ok(Attr::Pair(Box::new(a), Box::new(b)))
            }
            t => perr(
                at,
                format!("expected an attribute value, found {}", t.describe()),
            ),
        }
    }

    fn constant(
        &mut self,
        decls: Vec<(String, (usize, usize), Option<String>, TensorType)>,
        op_at: (usize, usize),
    ) -> Result<(), ParseError> {
        let mut decls = decls.into_iter();
        let (Some((name, at, nnef_name, ty)), None) = (decls.next(), decls.next()) else {
            return perr(op_at, "const defines exactly one value");
        };
        let label = self.opt_string();
        let Some(shape) = ty.shape() else {
            return perr(at, format!("constant type {ty} must have known extents"));
        };
        if !ty.layout.is_row_major() {
            return perr(at, format!("constant type {ty} must be row-major"));
        }
        let volume: usize = shape.iter().product();
        let data_at = self.at();
        let tensor = if self.eat_punct('[') {
            let items: Vec<(Tok, (usize, usize))> = self.seq(']', |p| {
                let at = p.at();
                Ok((p.next().tok, at))
            })?;
            if items.len() != volume {
                return perr(
                    data_at,
                    format!(
                        "constant {name} has {} values but type {ty} has {volume} elements",
                        items.len()
                    ),
                );
            }
            let data = match ty.dtype {
                DType::F32 => TensorData::F32(
                    items
                        .iter()
                        .map(|(t, at)| match t {
                            Tok::Number(s) | Tok::Ident(s) => s.parse::<f32>().map_or_else(
                                |_| perr(*at, format!("expected an f32, found `{s}`")),
                                Ok,
                            ),
                            t => perr(*at, format!("expected an f32, found {}", t.describe())),
                        })
                        .collect::<Result<_, _>>()?,
                ),
                DType::I32 => TensorData::I32(
                    items
                        .iter()
                        .map(|(t, at)| match t {
                            Tok::Number(s) => s.parse::<i32>().map_or_else(
                                |_| perr(*at, format!("expected an i32, found `{s}`")),
                                Ok,
                            ),
                            t => perr(*at, format!("expected an i32, found {}", t.describe())),
                        })
                        .collect::<Result<_, _>>()?,
                ),
                DType::Bool => TensorData::Bool(
                    items
                        .iter()
                        .map(|(t, at)| match t {
                            Tok::Ident(s) if s == "true" => Ok(true),
                            Tok::Ident(s) if s == "false" => Ok(false),
                            t => perr(
                                *at,
                                format!("expected true or false, found {}", t.describe()),
                            ),
                        })
                        .collect::<Result<_, _>>()?,
                ),
            };
            Tensor { shape, data }
        } else {
            Tensor::zeros(ty.dtype, shape)
        };
        let c = ConstId(self.g.consts.len() as u32);
        self.g.consts.push(Constant { tensor, label });
        self.define(
            name,
            at,
            Value {
                ty,
                def: ValueDef::Const(c),
                name: nnef_name,
            },
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
