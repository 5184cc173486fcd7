//! The text form of a graph: printer. `ir::parse` reads the same text back.
//!
//! ```text
//! nnefir 1
//! graph main(%v0 "input": f32[1,3,224,224]) -> (%v2) {
//!   %c0 "w": f32[64,3,7,7] = const "conv1/filter"      ; 37632 B
//!   %c1: f32[] = const [0.0]
//!   %v1: f32[1,64,112,112] = conv(%v0, %c0, %c1) border=constant padding=[(3,3),(3,3)] stride=[2,2] dilation=[1,1] groups=1
//!   %v2: f32[1,64,112,112] = relu(%v1)
//! }
//! ```
//!
//! Layout of the text:
//! - a version line `nnefir 1`; then `graph NAME(inputs) -> (outputs) {`, one line per
//!   constant, one line per node, and `}`;
//! - a value is declared as `%id ["nnef-name"]: type`; types are `f32[1,?,3]`, with the
//!   layout appended (`{0,1}`) only when it is not row-major;
//! - a constant line ends with its `variable` label (if any) and, when printed with
//!   [`PrintOptions::const_data`], its row-major data as a flat list; otherwise the data is
//!   elided and a `; N B` comment gives its size;
//! - a node line is `outputs = mnemonic(operands) attr=value …`; attribute names and
//!   spellings are NNEF's, and every attribute is printed (empty lists included) so the
//!   text never depends on defaults. `;` starts a comment.
//!
//! Numbering is canonical: non-constant values are `%v0, %v1, …` in print order (inputs
//! first, then node results in node order), constants `%c0, %c1, …` in value order. Two
//! graphs that differ only in arena indices print identically. The body lists constants
//! first, then nodes; a graph whose values are stored in that order (inputs, constants,
//! node results — what a builder produces when it adds constants before nodes) satisfies
//! `parse(print(g)) == g` when data is printed.
//!
//! The printer never fails and never panics, even on graphs the verifier rejects:
//! out-of-range ids print as `%invalid17`. It does not print fusion or memory plans (the
//! IR has none yet).

use super::graph::{Graph, NodeId, ValueDef, ValueId};
use super::op::{ConvAttrs, Op, UnaryOp, WindowAttrs};
use super::tensor::TensorData;
use std::fmt::{self, Write as _};

/// Version of the text format, printed on the first line.
pub const TEXT_VERSION: u32 = 1;

/// What to print besides the structure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrintOptions {
    /// Print constants' values (otherwise elided, with their byte size as a comment).
    pub const_data: bool,
}

/// Prints the graph with constant data elided.
pub fn print(g: &Graph) -> String {
    print_with(g, PrintOptions::default())
}

/// Prints the graph.
pub fn print_with(g: &Graph, options: PrintOptions) -> String {
    Printer::new(g, options).graph()
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print(self))
    }
}

/// Canonical names of a graph's values and the printed line of each item; the verifier
/// uses it to show the offending line.
pub struct Printer<'g> {
    g: &'g Graph,
    options: PrintOptions,
    names: Vec<String>,
}

impl<'g> Printer<'g> {
    pub fn new(g: &'g Graph, options: PrintOptions) -> Printer<'g> {
        let mut names = vec![String::new(); g.values.len()];
        let mut next_v = 0usize;
        let mut next_c = 0usize;
        let mut assign_v = |names: &mut Vec<String>, v: ValueId| {
            if let Some(slot) = names.get_mut(v.index())
                && slot.is_empty()
            {
                *slot = format!("%v{next_v}");
                next_v += 1;
            }
        };
        for &v in &g.inputs {
            assign_v(&mut names, v);
        }
        for n in &g.nodes {
            for &v in &n.outputs {
                assign_v(&mut names, v);
            }
        }
        for (i, val) in g.values.iter().enumerate() {
            if matches!(val.def, ValueDef::Const(_)) && names[i].is_empty() {
                names[i] = format!("%c{next_c}");
                next_c += 1;
            }
        }
        // Values nothing defines (a broken graph) still get a stable name.
        for v in 0..g.values.len() {
            assign_v(&mut names, ValueId(v as u32));
        }
        Printer { g, options, names }
    }

    /// The canonical name of a value (`%v3`, `%c0`), or `%invalidN` if out of range.
    pub fn value_name(&self, v: ValueId) -> String {
        match self.names.get(v.index()) {
            Some(n) => n.clone(),
            None => format!("%invalid{}", v.0),
        }
    }

    fn decl(&self, v: ValueId) -> String {
        let mut s = self.value_name(v);
        if let Some(val) = self.g.values.get(v.index()) {
            if let Some(name) = &val.name {
                s.push(' ');
                s.push_str(&quote(name));
            }
            let _ = write!(s, ": {}", val.ty);
        }
        s
    }

    /// `graph main(%v0 "input": f32[1,3]) -> (%v4) {`
    pub fn header(&self) -> String {
        let inputs: Vec<String> = self.g.inputs.iter().map(|&v| self.decl(v)).collect();
        let outputs: Vec<String> = self.g.outputs.iter().map(|&v| self.value_name(v)).collect();
        format!(
            "graph {}({}) -> ({}) {{",
            ident_or_quote(&self.g.name),
            inputs.join(", "),
            outputs.join(", ")
        )
    }

    /// The line declaring a constant value (without indentation).
    pub fn const_line(&self, v: ValueId) -> String {
        let mut s = format!("{} = const", self.decl(v));
        let Some(val) = self.g.values.get(v.index()) else {
            return s;
        };
        let ValueDef::Const(c) = val.def else {
            return s;
        };
        let Some(constant) = self.g.consts.get(c.index()) else {
            let _ = write!(s, " ; missing constant {c}");
            return s;
        };
        if let Some(label) = &constant.label {
            s.push(' ');
            s.push_str(&quote(label));
        }
        let t = &constant.tensor;
        if self.options.const_data {
            s.push(' ');
            match &t.data {
                TensorData::F32(v) => s.push_str(&list(v.iter().map(|x| fmt_f32(*x)))),
                TensorData::I32(v) => s.push_str(&list(v.iter())),
                TensorData::Bool(v) => s.push_str(&list(v.iter())),
            }
        } else {
            let _ = write!(s, "      ; {} B", t.len() * t.dtype().size());
        }
        s
    }

    /// The line of a node (without indentation).
    pub fn node_line(&self, n: NodeId) -> String {
        let Some(node) = self.g.nodes.get(n.index()) else {
            return format!("{n} (no such node)");
        };
        let lhs = if node.outputs.is_empty() {
            "()".to_string()
        } else {
            node.outputs
                .iter()
                .map(|&v| self.decl(v))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let operands: Vec<String> = node.inputs.iter().map(|&v| self.value_name(v)).collect();
        let mut s = format!("{lhs} = {}({})", node.op.mnemonic(), operands.join(", "));
        for (k, v) in attributes(&node.op) {
            let _ = write!(s, " {k}={v}");
        }
        s
    }

    /// The whole text.
    pub fn graph(&self) -> String {
        let mut s = format!("nnefir {TEXT_VERSION}\n{}\n", self.header());
        for (i, val) in self.g.values.iter().enumerate() {
            if matches!(val.def, ValueDef::Const(_)) {
                let _ = writeln!(s, "  {}", self.const_line(ValueId(i as u32)));
            }
        }
        for n in 0..self.g.nodes.len() {
            let _ = writeln!(s, "  {}", self.node_line(NodeId(n as u32)));
        }
        s.push_str("}\n");
        s
    }
}

/// Shortest text that parses back to the same f32 (`1.0`, `1e-5`, `NaN`, `inf`).
pub fn fmt_f32(x: f32) -> String {
    format!("{x:?}")
}

fn list<T: fmt::Display>(items: impl Iterator<Item = T>) -> String {
    let parts: Vec<String> = items.map(|x| x.to_string()).collect();
    format!("[{}]", parts.join(","))
}

fn pads(p: &[(usize, usize)]) -> String {
    list(p.iter().map(|(a, b)| format!("({a},{b})")))
}

/// A string literal with `"` and `\` escaped.
pub fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn ident_or_quote(s: &str) -> String {
    let mut chars = s.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok { s.to_string() } else { quote(s) }
}

fn conv_attrs(a: &ConvAttrs, transposed: bool) -> Vec<(&'static str, String)> {
    let mut v = vec![
        ("border", a.border.mnemonic().to_string()),
        ("padding", pads(&a.padding)),
        ("stride", list(a.stride.iter())),
        ("dilation", list(a.dilation.iter())),
    ];
    if transposed || !a.output_shape.is_empty() {
        v.push(("output_shape", list(a.output_shape.iter())));
    }
    v.push(("groups", a.groups.to_string()));
    v
}

fn window_attrs(w: &WindowAttrs, transposed: bool) -> Vec<(&'static str, String)> {
    let mut v = vec![
        ("size", list(w.size.iter())),
        ("border", w.border.mnemonic().to_string()),
        ("padding", pads(&w.padding)),
        ("stride", list(w.stride.iter())),
        ("dilation", list(w.dilation.iter())),
    ];
    if transposed || !w.output_shape.is_empty() {
        v.push(("output_shape", list(w.output_shape.iter())));
    }
    v
}

fn method_name(m: super::op::ResampleMethod) -> &'static str {
    use super::op::ResampleMethod::*;
    match m {
        Symmetric => "symmetric",
        Asymmetric => "asymmetric",
        Aligned => "aligned",
    }
}

/// The attributes of an op as `(name, printed value)`, in print order. The parser accepts
/// exactly these names.
pub fn attributes(op: &Op) -> Vec<(&'static str, String)> {
    let axes = |a: &[usize]| vec![("axes", list(a.iter()))];
    match op {
        Op::Unary(UnaryOp::Elu { alpha }) | Op::Unary(UnaryOp::LeakyRelu { alpha }) => {
            vec![("alpha", fmt_f32(*alpha))]
        }
        Op::Unary(UnaryOp::Selu { alpha, lambda }) => {
            vec![("alpha", fmt_f32(*alpha)), ("lambda", fmt_f32(*lambda))]
        }
        Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Clamp | Op::Linear => vec![],
        Op::Conv(a) => conv_attrs(a, false),
        Op::Deconv(a) => conv_attrs(a, true),
        Op::Box { window, normalize } => {
            let mut v = window_attrs(window, false);
            v.push(("normalize", normalize.to_string()));
            v
        }
        Op::Debox { window, normalize } => {
            let mut v = window_attrs(window, true);
            v.push(("normalize", normalize.to_string()));
            v
        }
        Op::ArgmaxPool(w) | Op::Sample(w) | Op::MaxPool(w) => window_attrs(w, false),
        Op::Desample(w) => window_attrs(w, true),
        Op::MultilinearUpsample {
            factor,
            method,
            border,
        } => vec![
            ("factor", list(factor.iter())),
            ("method", method_name(*method).to_string()),
            ("border", border.mnemonic().to_string()),
        ],
        Op::Reduce { axes: a, .. } | Op::Softmax { axes: a } => axes(a),
        Op::Squeeze { axes: a } | Op::Unsqueeze { axes: a } | Op::Transpose { axes: a } => axes(a),
        Op::MatMul {
            transpose_a,
            transpose_b,
        } => {
            vec![
                ("transposeA", transpose_a.to_string()),
                ("transposeB", transpose_b.to_string()),
            ]
        }
        Op::BatchNorm { epsilon } => vec![("epsilon", fmt_f32(*epsilon))],
        Op::Reshape {
            shape,
            axis_start,
            axis_count,
        } => vec![
            ("shape", list(shape.iter())),
            ("axis_start", axis_start.to_string()),
            ("axis_count", axis_count.to_string()),
        ],
        Op::Split { axis, ratios } => {
            vec![("axis", axis.to_string()), ("ratios", list(ratios.iter()))]
        }
        Op::Concat { axis } | Op::Stack { axis } | Op::Unstack { axis } | Op::Gather { axis } => {
            vec![("axis", axis.to_string())]
        }
        Op::Slice {
            axes: a,
            begin,
            end,
            stride,
        } => vec![
            ("axes", list(a.iter())),
            ("begin", list(begin.iter())),
            ("end", list(end.iter())),
            ("stride", list(stride.iter())),
        ],
        Op::Tile { repeats } => vec![("repeats", list(repeats.iter()))],
        Op::Pad {
            padding,
            border,
            value,
        } => vec![
            ("padding", pads(padding)),
            ("border", border.mnemonic().to_string()),
            ("value", fmt_f32(*value)),
        ],
        Op::Cast { to } => vec![("to", to.mnemonic().to_string())],
        Op::RoiPool { output_size, .. } => vec![("output_size", list(output_size.iter()))],
        Op::RoiResample {
            output_size,
            method,
        } => vec![
            ("output_size", list(output_size.iter())),
            ("method", method_name(*method).to_string()),
        ],
    }
}
