//! Building NNEF graphs from Rust: typed handles wired by op functions, checked at every
//! call, finished into an NNEF document that is written out, compiled or run.
//!
//! A [`Graph`] records NNEF statements (an invocation of a stdlib or user fragment, with
//! tensor arguments as [`Value`] handles and attributes as values). Each call binds its
//! arguments through the front end's own invocation logic
//! ([`nnefc_compiler::front::call::Library::infer`]), so types, shapes, defaults and
//! generics are checked exactly as in an NNEF file, and an error names the op, the
//! argument and the shapes, and points at the caller's line (`#[track_caller]`).
//! [`Graph::finish`] sorts the statements, checks what can only be checked on the whole
//! graph (outputs, unconnected placeholders, cycles), drops dead statements with a
//! warning, and returns a [`Document`]: NNEF text plus the variables' data. A document
//! is written as a model folder ([`Document::write`]), compiled by
//! [`nnefc_compiler::session::compile_graph`] (the file path's pipeline; there is no
//! second one), or loaded and run in this process ([`Document::load`]).
//!
//! The typed functions of [`ops`] are generated from `stdlib.nnef` (see
//! `tests/all/graph_ops.rs`); [`grad`](crate::graph::grad) adds reverse-mode gradients.
//! This module does not evaluate anything itself: no shape rule lives here.

pub mod grad;
mod nnef_in;
// Generated text: kept exactly as `tests/all/graph_ops.rs` writes it.
#[rustfmt::skip]
pub mod ops;

pub use nnef_in::{from_nnef, from_nnef_with_values};

use nnefc_compiler::front::call::{CallArg, CallError, CallResult, Library, tensor_type};
use nnefc_compiler::front::value;
use nnefc_compiler::ir::{DType, Dim, Tensor, TensorData, TensorType};
use nnefc_compiler::session;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::panic::Location;
use std::path::Path;
use std::rc::Rc;

pub use grad::{grad, sgd};

/// A builder error: what is wrong, and the line of the user's code that did it.
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    /// The call that failed (`None` for errors of a whole graph, e.g. no outputs).
    pub location: Option<&'static Location<'static>>,
    /// One line saying what is wrong, naming the op and the argument.
    pub message: String,
    /// More lines: shapes involved, the fragment's signature, how to fix it.
    pub notes: Vec<String>,
}

impl Error {
    fn new(location: Option<&'static Location<'static>>, message: impl Into<String>) -> Error {
        Error {
            location,
            message: message.into(),
            notes: Vec::new(),
        }
    }

    fn note(mut self, n: impl Into<String>) -> Error {
        self.notes.push(n.into());
        self
    }

    /// The message and notes without the location (stable text for tests).
    pub fn text(&self) -> String {
        let mut s = format!("error: {}", self.message);
        for n in &self.notes {
            s.push_str("\n  note: ");
            s.push_str(n);
        }
        s
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(l) = self.location {
            write!(f, "{}:{}:{}: ", l.file(), l.line(), l.column())?;
        }
        f.write_str(&self.text())
    }
}

impl std::error::Error for Error {}

/// The builder's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// A tensor in a graph under construction: a cheap handle (clone it freely). It keeps its
/// graph alive; using it in another graph is an error.
#[derive(Clone)]
pub struct Value {
    g: Rc<RefCell<Inner>>,
    id: usize,
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.g.borrow();
        let v = &g.values[self.id];
        write!(f, "{}: {}", v.ident, v.ty)
    }
}

impl Value {
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.g.borrow().values[self.id].ty.dtype
    }

    /// The extents, `None` where still open.
    pub fn shape(&self) -> Vec<Option<usize>> {
        self.g.borrow().values[self.id]
            .ty
            .dims
            .iter()
            .map(|d| d.known())
            .collect()
    }

    /// The rank.
    pub fn rank(&self) -> usize {
        self.g.borrow().values[self.id].ty.rank()
    }

    /// The identifier this value has in the NNEF text.
    pub fn name(&self) -> String {
        self.g.borrow().values[self.id].ident.clone()
    }

    /// The graph this value belongs to.
    pub fn graph(&self) -> Graph {
        Graph {
            inner: self.g.clone(),
        }
    }
}

/// An argument of an op: a tensor handle, a literal (a scalar, integer or logical literal
/// stands for a constant tensor where a tensor is expected, as in NNEF: `add(x, 1.0)`),
/// or an array or tuple of these.
#[derive(Clone, Debug)]
pub enum Arg {
    /// A tensor of the graph.
    Value(Value),
    /// `integer`.
    Integer(i64),
    /// `scalar` (NNEF computes attributes in double precision).
    Scalar(f64),
    /// `logical`.
    Logical(bool),
    /// `string`.
    Str(String),
    /// `T[]`.
    Array(Vec<Arg>),
    /// `(A, B, ...)`.
    Tuple(Vec<Arg>),
}

impl From<&Value> for Arg {
    fn from(v: &Value) -> Arg {
        Arg::Value(v.clone())
    }
}
impl From<Value> for Arg {
    fn from(v: Value) -> Arg {
        Arg::Value(v)
    }
}
impl From<f32> for Arg {
    fn from(x: f32) -> Arg {
        Arg::Scalar(f64::from(x))
    }
}
impl From<f64> for Arg {
    fn from(x: f64) -> Arg {
        Arg::Scalar(x)
    }
}
impl From<i64> for Arg {
    fn from(x: i64) -> Arg {
        Arg::Integer(x)
    }
}
impl From<i32> for Arg {
    fn from(x: i32) -> Arg {
        Arg::Integer(i64::from(x))
    }
}
impl From<bool> for Arg {
    fn from(x: bool) -> Arg {
        Arg::Logical(x)
    }
}
impl From<&str> for Arg {
    fn from(x: &str) -> Arg {
        Arg::Str(x.to_string())
    }
}
impl From<String> for Arg {
    fn from(x: String) -> Arg {
        Arg::Str(x)
    }
}
impl From<&[Value]> for Arg {
    fn from(xs: &[Value]) -> Arg {
        Arg::Array(xs.iter().map(Arg::from).collect())
    }
}
impl<T: Into<Arg>> From<Vec<T>> for Arg {
    fn from(xs: Vec<T>) -> Arg {
        Arg::Array(xs.into_iter().map(Into::into).collect())
    }
}
impl<A: Into<Arg>, B: Into<Arg>> From<(A, B)> for Arg {
    fn from((a, b): (A, B)) -> Arg {
        Arg::Tuple(vec![a.into(), b.into()])
    }
}

/// What an op returns, shaped as its fragment declares: one tensor, an array of tensors
/// (`split`), or a tuple (`max_pool_with_index`).
#[derive(Clone, Debug)]
pub enum Outputs {
    /// One tensor.
    One(Value),
    /// `tensor<T>[]`.
    Array(Vec<Outputs>),
    /// Several results.
    Tuple(Vec<Outputs>),
}

impl Outputs {
    /// The one tensor; an error when the op returned several (using them as one value).
    #[track_caller]
    pub fn single(self) -> Result<Value> {
        Outputs::single_at(self, Location::caller())
    }

    /// The tensors of an array result, or the one tensor.
    pub fn values(self) -> Vec<Value> {
        match self {
            Outputs::One(v) => vec![v],
            Outputs::Array(xs) | Outputs::Tuple(xs) => {
                xs.into_iter().flat_map(Outputs::values).collect()
            }
        }
    }

    /// The `n` results of a fragment with several results.
    #[track_caller]
    pub fn parts(self, n: usize) -> Result<Vec<Outputs>> {
        match self {
            Outputs::Tuple(xs) if xs.len() == n => Ok(xs),
            other => Err(Error::new(
                Some(Location::caller()),
                format!(
                    "expected {n} results, but the op returned {}",
                    other.describe()
                ),
            )),
        }
    }

    /// [`single`](Outputs::single) of a result that may be missing.
    #[track_caller]
    pub fn single_or(o: Option<Outputs>) -> Result<Value> {
        match o {
            Some(o) => o.single(),
            None => Err(Error::new(Some(Location::caller()), "a result is missing")),
        }
    }

    fn describe(&self) -> String {
        match self {
            Outputs::One(_) => "one tensor".into(),
            Outputs::Array(xs) => format!("an array of {} tensors", xs.len()),
            Outputs::Tuple(xs) => format!("a tuple of {} results", xs.len()),
        }
    }
}

/// An argument as a statement stores it (handles as value indices, so statements do not
/// keep their own graph alive).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum SArg {
    Value(usize),
    Integer(i64),
    Scalar(f64),
    Logical(bool),
    Str(String),
    Array(Vec<SArg>),
    Tuple(Vec<SArg>),
}

/// The left-hand side of a statement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Pattern {
    One(usize),
    Array(Vec<Pattern>),
    Tuple(Vec<Pattern>),
}

impl Pattern {
    fn ids(&self, out: &mut Vec<usize>) {
        match self {
            Pattern::One(v) => out.push(*v),
            Pattern::Array(xs) | Pattern::Tuple(xs) => xs.iter().for_each(|x| x.ids(out)),
        }
    }
}

/// One NNEF statement: `pattern = op<generic>(args);`.
#[derive(Clone, Debug)]
pub(crate) struct Stmt {
    pub op: String,
    pub generic: Option<DType>,
    pub args: Vec<(Option<String>, SArg)>,
    pub results: Pattern,
    pub caller: &'static Location<'static>,
}

/// How a value came to be.
#[derive(Clone, Debug)]
pub(crate) enum Def {
    Input,
    Variable(String),
    Stmt(usize),
    /// Stands for a value connected later ([`Graph::connect`]).
    Placeholder(Option<usize>),
}

#[derive(Clone, Debug)]
pub(crate) struct ValueInfo {
    pub ty: TensorType,
    pub ident: String,
    pub def: Def,
    pub caller: &'static Location<'static>,
}

pub(crate) struct Inner {
    pub name: String,
    /// NNEF text of the user's fragments, in definition order.
    pub fragments: Vec<String>,
    pub lib: Rc<Library>,
    pub values: Vec<ValueInfo>,
    pub stmts: Vec<Stmt>,
    pub inputs: Vec<usize>,
    pub variables: BTreeMap<String, Tensor>,
    pub outputs: Vec<(String, usize)>,
    pub idents: HashSet<String>,
    next_auto: usize,
}

thread_local! {
    /// The stdlib alone, parsed once per thread (a graph without fragments shares it).
    static STDLIB: Rc<Library> = Rc::new(Library::new("").expect("the stdlib parses"));
}

/// NNEF keywords, which cannot name a tensor.
const KEYWORDS: &[&str] = &[
    "version",
    "extension",
    "fragment",
    "graph",
    "tensor",
    "integer",
    "scalar",
    "logical",
    "string",
    "true",
    "false",
    "for",
    "in",
    "if",
    "else",
    "yield",
    "length_of",
    "shape_of",
    "range_of",
];

fn valid_ident(s: &str) -> bool {
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&s)
}

/// A graph under construction. Cloning gives another handle to the same graph.
#[derive(Clone)]
pub struct Graph {
    pub(crate) inner: Rc<RefCell<Inner>>,
}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Graph({})", self.inner.borrow().name)
    }
}

impl Graph {
    /// An empty graph; `name` becomes the NNEF graph's name (and the default symbol
    /// prefix, made a C identifier).
    pub fn new(name: &str) -> Graph {
        Graph {
            inner: Rc::new(RefCell::new(Inner {
                name: name.to_string(),
                fragments: Vec::new(),
                lib: STDLIB.with(Rc::clone),
                values: Vec::new(),
                stmts: Vec::new(),
                inputs: Vec::new(),
                variables: BTreeMap::new(),
                outputs: Vec::new(),
                idents: HashSet::new(),
                next_auto: 0,
            })),
        }
    }

    fn handle(&self, id: usize) -> Value {
        Value {
            g: self.inner.clone(),
            id,
        }
    }

    fn claim(&self, name: &str, what: &str, at: &'static Location<'static>) -> Result<()> {
        let mut g = self.inner.borrow_mut();
        if !valid_ident(name) {
            return Err(Error::new(
                Some(at),
                format!("`{name}` cannot name {what}: it is not an NNEF identifier"),
            )
            .note("use letters, digits and `_`, starting with a letter or `_`, and no keyword"));
        }
        if !g.idents.insert(name.to_string()) {
            return Err(Error::new(
                Some(at),
                format!("the name `{name}` is already used in graph `{}`", g.name),
            ));
        }
        Ok(())
    }

    fn auto_ident(&self, stem: &str) -> String {
        let mut g = self.inner.borrow_mut();
        loop {
            let s = format!("{stem}{}", g.next_auto);
            g.next_auto += 1;
            if g.idents.insert(s.clone()) {
                return s;
            }
        }
    }

    fn push_value(
        &self,
        ty: TensorType,
        ident: String,
        def: Def,
        caller: &'static Location<'static>,
    ) -> usize {
        let mut g = self.inner.borrow_mut();
        g.values.push(ValueInfo {
            ty,
            ident,
            def,
            caller,
        });
        g.values.len() - 1
    }

    /// A graph input of fixed shape.
    #[track_caller]
    pub fn input(&self, name: &str, dtype: DType, shape: &[usize]) -> Result<Value> {
        let dims: Vec<Option<usize>> = shape.iter().copied().map(Some).collect();
        self.input_dims(name, dtype, &dims)
    }

    /// A graph input whose extents may be open (`None`): checked with what is known, and
    /// given at compile time. An open leading extent compiles to a run-time batch.
    #[track_caller]
    pub fn input_dims(&self, name: &str, dtype: DType, dims: &[Option<usize>]) -> Result<Value> {
        let at = Location::caller();
        self.claim(name, "an input", at)?;
        let id = self.push_value(tensor_type(dtype, dims), name.to_string(), Def::Input, at);
        self.inner.borrow_mut().inputs.push(id);
        Ok(self.handle(id))
    }

    /// A variable (a weight) holding `data`, stored as `<label>.dat` when the document is
    /// written. Labels are relative paths of letters, digits, `_`, `-`, `.` and `/`.
    #[track_caller]
    pub fn variable(&self, label: &str, data: Tensor) -> Result<Value> {
        let at = Location::caller();
        let ok = !label.is_empty()
            && !label.starts_with('/')
            && label
                .split('/')
                .all(|p| !p.is_empty() && p != "." && p != "..")
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
        if !ok {
            return Err(Error::new(
                Some(at),
                format!("`{label}` cannot label a variable"),
            )
            .note("a label is a relative path of letters, digits, `_`, `-`, `.` and `/` (no `..`)"));
        }
        if self.inner.borrow().variables.contains_key(label) {
            return Err(Error::new(
                Some(at),
                format!("a variable labelled `{label}` already exists"),
            )
            .note("reuse its handle to share the weight"));
        }
        let stem: String = label
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let ident = if valid_ident(&stem) && !self.inner.borrow().idents.contains(&stem) {
            self.inner.borrow_mut().idents.insert(stem.clone());
            stem
        } else {
            self.auto_ident("var")
        };
        let ty = TensorType::new(data.dtype(), &data.shape);
        let id = self.push_value(ty, ident, Def::Variable(label.to_string()), at);
        self.inner
            .borrow_mut()
            .variables
            .insert(label.to_string(), data);
        Ok(self.handle(id))
    }

    /// A variable read from a `.dat` file.
    #[track_caller]
    pub fn variable_from_file(&self, label: &str, path: &Path) -> Result<Value> {
        let at = Location::caller();
        let data = crate::datfile::read(path)
            .map_err(|e| Error::new(Some(at), format!("cannot read variable `{label}`: {e}")))?;
        self.variable(label, data)
    }

    /// A constant tensor written into the NNEF text (`constant(shape, value)`): for small
    /// values. Use [`variable`](Graph::variable) for weights.
    #[track_caller]
    pub fn constant(&self, data: &Tensor) -> Result<Value> {
        let at = Location::caller();
        let items: Vec<SArg> = match &data.data {
            TensorData::F32(xs) => xs.iter().map(|x| SArg::Scalar(f64::from(*x))).collect(),
            TensorData::I32(xs) => xs.iter().map(|x| SArg::Integer(i64::from(*x))).collect(),
            TensorData::Bool(xs) => xs.iter().map(|x| SArg::Logical(*x)).collect(),
        };
        let shape = SArg::Array(
            data.shape
                .iter()
                .map(|&d| SArg::Integer(d as i64))
                .collect(),
        );
        // Every element equal: NNEF broadcasts a one-element value.
        let value = if items.windows(2).all(|w| w[0] == w[1]) && !items.is_empty() {
            SArg::Array(vec![items[0].clone()])
        } else {
            SArg::Array(items)
        };
        let out = self.statement(
            "constant",
            Some(data.dtype()),
            vec![(Some("shape".into()), shape), (Some("value".into()), value)],
            at,
        )?;
        Outputs::single_at(out, at)
    }

    /// A scalar constant of shape `[]`... with the given extents, all `value`.
    #[track_caller]
    pub fn fill(&self, shape: &[usize], value: f32) -> Result<Value> {
        let n = shape.iter().product();
        self.constant(&Tensor::f32(shape.to_vec(), vec![value; n]))
    }

    /// Makes `v` a graph output called `name`. Outputs are the compiled model's interface,
    /// in the order they are added.
    #[track_caller]
    pub fn output(&self, name: &str, v: &Value) -> Result<()> {
        let at = Location::caller();
        self.check_same(v, "output", at)?;
        if self.inner.borrow().outputs.iter().any(|(n, _)| n == name) {
            return Err(
                Error::new(Some(at), format!("output `{name}` is set twice"))
                    .note("each output is one value: give the second one its own name"),
            );
        }
        let rename = {
            let g = self.inner.borrow();
            let info = &g.values[v.id];
            matches!(info.def, Def::Stmt(_)) && !g.outputs.iter().any(|(_, o)| *o == v.id)
        };
        let id = if rename && (v.name() == name || !self.inner.borrow().idents.contains(name)) {
            self.claim_rename(v.id, name, at)?;
            v.id
        } else {
            // An input, a variable or a value already output: the output gets a copy.
            if v.name() != name {
                self.claim(name, "an output", at)?;
            }
            let out = self.statement("copy", None, vec![(None, SArg::Value(v.id))], at)?;
            let id = Outputs::single_at(out, at)?.id;
            let mut g = self.inner.borrow_mut();
            let old = std::mem::replace(&mut g.values[id].ident, name.to_string());
            g.idents.remove(&old);
            id
        };
        self.inner.borrow_mut().outputs.push((name.to_string(), id));
        Ok(())
    }

    fn claim_rename(&self, id: usize, name: &str, at: &'static Location<'static>) -> Result<()> {
        let old = self.inner.borrow().values[id].ident.clone();
        if old == name {
            return Ok(());
        }
        self.claim(name, "an output", at)?;
        let mut g = self.inner.borrow_mut();
        g.idents.remove(&old);
        g.values[id].ident = name.to_string();
        Ok(())
    }

    /// A value of the given type to be connected later with [`connect`](Graph::connect):
    /// for wiring a value before the op that computes it is written.
    #[track_caller]
    pub fn placeholder(&self, dtype: DType, dims: &[Option<usize>]) -> Value {
        let at = Location::caller();
        let ident = self.auto_ident("p");
        let id = self.push_value(tensor_type(dtype, dims), ident, Def::Placeholder(None), at);
        self.handle(id)
    }

    /// Connects `placeholder` to `value`: every use of the placeholder reads `value`.
    /// The types must agree; a placeholder is connected once; a connection that makes a
    /// value depend on itself is reported by [`finish`](Graph::finish).
    #[track_caller]
    pub fn connect(&self, placeholder: &Value, value: &Value) -> Result<()> {
        let at = Location::caller();
        self.check_same(placeholder, "connect", at)?;
        self.check_same(value, "connect", at)?;
        let mut g = self.inner.borrow_mut();
        let (pty, vty) = (
            g.values[placeholder.id].ty.clone(),
            g.values[value.id].ty.clone(),
        );
        match g.values[placeholder.id].def {
            Def::Placeholder(None) => {}
            Def::Placeholder(Some(prev)) => {
                let prev = g.values[prev].ident.clone();
                return Err(Error::new(
                    Some(at),
                    format!(
                        "placeholder `{}` is already connected (to `{prev}`)",
                        g.values[placeholder.id].ident
                    ),
                )
                .note("a placeholder stands for one value"));
            }
            _ => {
                return Err(Error::new(
                    Some(at),
                    format!(
                        "`{}` is not a placeholder: only placeholders are connected after creation",
                        g.values[placeholder.id].ident
                    ),
                ));
            }
        }
        let fits = pty.dtype == vty.dtype
            && pty.rank() == vty.rank()
            && pty
                .dims
                .iter()
                .zip(&vty.dims)
                .all(|(a, b)| a.merge(*b).is_some());
        if !fits {
            return Err(Error::new(
                Some(at),
                format!(
                    "cannot connect placeholder `{}` of type {pty} to `{}` of type {vty}",
                    g.values[placeholder.id].ident, g.values[value.id].ident
                ),
            ));
        }
        g.values[placeholder.id].def = Def::Placeholder(Some(value.id));
        Ok(())
    }

    fn check_same(&self, v: &Value, what: &str, at: &'static Location<'static>) -> Result<()> {
        if Rc::ptr_eq(&v.g, &self.inner) {
            return Ok(());
        }
        Err(Error::new(
            Some(at),
            format!(
                "{what}: `{}` belongs to graph `{}`, not to graph `{}`",
                v.name(),
                v.g.borrow().name,
                self.inner.borrow().name
            ),
        )
        .note("values cannot cross graphs; build the value in this graph, or call a fragment"))
    }

    /// Invokes fragment `op` (stdlib or defined on this graph) with `args` in NNEF order:
    /// positional tensors first, then named attributes (`(Some("stride"), ...)`).
    /// `generic` is `<T>` for generic fragments whose type no argument determines.
    #[track_caller]
    pub fn call(
        &self,
        op: &str,
        generic: Option<DType>,
        args: Vec<(Option<&str>, Arg)>,
    ) -> Result<Outputs> {
        let at = Location::caller();
        let mut sargs = Vec::with_capacity(args.len());
        for (name, a) in args {
            sargs.push((name.map(str::to_string), self.to_sarg(a, op, at)?));
        }
        self.statement(op, generic, sargs, at)
    }

    fn to_sarg(&self, a: Arg, op: &str, at: &'static Location<'static>) -> Result<SArg> {
        Ok(match a {
            Arg::Value(v) => {
                self.check_same(&v, op, at)?;
                SArg::Value(v.id)
            }
            Arg::Integer(i) => SArg::Integer(i),
            Arg::Scalar(x) => {
                if !x.is_finite() {
                    return Err(Error::new(
                        Some(at),
                        format!("{op}: the scalar {x} has no NNEF literal"),
                    )
                    .note("NNEF literals are finite numbers"));
                }
                SArg::Scalar(x)
            }
            Arg::Logical(b) => SArg::Logical(b),
            Arg::Str(s) => SArg::Str(s),
            Arg::Array(xs) => SArg::Array(
                xs.into_iter()
                    .map(|x| self.to_sarg(x, op, at))
                    .collect::<Result<_>>()?,
            ),
            Arg::Tuple(xs) => SArg::Tuple(
                xs.into_iter()
                    .map(|x| self.to_sarg(x, op, at))
                    .collect::<Result<_>>()?,
            ),
        })
    }

    fn call_arg(&self, a: &SArg) -> CallArg {
        match a {
            SArg::Value(v) => CallArg::Tensor(self.inner.borrow().values[*v].ty.clone()),
            SArg::Integer(i) => CallArg::Integer(*i),
            SArg::Scalar(x) => CallArg::Scalar(*x),
            SArg::Logical(b) => CallArg::Logical(*b),
            SArg::Str(s) => CallArg::Str(s.clone()),
            SArg::Array(xs) => CallArg::Array(xs.iter().map(|x| self.call_arg(x)).collect()),
            SArg::Tuple(xs) => CallArg::Tuple(xs.iter().map(|x| self.call_arg(x)).collect()),
        }
    }

    /// Checks and records one statement; returns handles to its results.
    pub(crate) fn statement(
        &self,
        op: &str,
        generic: Option<DType>,
        args: Vec<(Option<String>, SArg)>,
        at: &'static Location<'static>,
    ) -> Result<Outputs> {
        if matches!(op, "external" | "variable") {
            return Err(Error::new(
                Some(at),
                format!("`{op}` is not called directly on a graph"),
            )
            .note("use Graph::input / Graph::input_dims for `external` and Graph::variable for `variable`"));
        }
        let lib = self.inner.borrow().lib.clone();
        if !lib.has(op) {
            let mut e = Error::new(Some(at), format!("unknown operation `{op}`"));
            if let Some(s) = lib.suggest(op) {
                e = e.note(format!("did you mean `{s}`?"));
            }
            return Err(e);
        }
        let call_args: Vec<(Option<String>, CallArg)> = args
            .iter()
            .map(|(n, a)| (n.clone(), self.call_arg(a)))
            .collect();
        let result = lib
            .infer(op, generic, &call_args)
            .map_err(|e| self.call_error(op, &args, e, at))?;
        let pattern = self.bind_results(&result, at);
        let stmt_index = self.inner.borrow().stmts.len();
        let mut ids = Vec::new();
        pattern.ids(&mut ids);
        for id in ids {
            self.inner.borrow_mut().values[id].def = Def::Stmt(stmt_index);
        }
        let outputs = self.outputs_of(&pattern);
        self.inner.borrow_mut().stmts.push(Stmt {
            op: op.to_string(),
            generic,
            args,
            results: pattern,
            caller: at,
        });
        Ok(outputs)
    }

    fn bind_results(&self, r: &CallResult, at: &'static Location<'static>) -> Pattern {
        match r {
            CallResult::Tensor(ty) => {
                let ident = self.auto_ident("t");
                Pattern::One(self.push_value(ty.clone(), ident, Def::Stmt(usize::MAX), at))
            }
            CallResult::Array(xs) => {
                Pattern::Array(xs.iter().map(|x| self.bind_results(x, at)).collect())
            }
            CallResult::Tuple(xs) => {
                Pattern::Tuple(xs.iter().map(|x| self.bind_results(x, at)).collect())
            }
        }
    }

    fn outputs_of(&self, p: &Pattern) -> Outputs {
        match p {
            Pattern::One(id) => Outputs::One(self.handle(*id)),
            Pattern::Array(xs) => Outputs::Array(xs.iter().map(|x| self.outputs_of(x)).collect()),
            Pattern::Tuple(xs) => Outputs::Tuple(xs.iter().map(|x| self.outputs_of(x)).collect()),
        }
    }

    fn call_error(
        &self,
        op: &str,
        args: &[(Option<String>, SArg)],
        e: CallError,
        at: &'static Location<'static>,
    ) -> Error {
        // The front end's labels point into a file; those that only say where (no file
        // here) add nothing to the message.
        let detail = e.detail.as_deref().filter(|d| {
            !matches!(
                *d,
                "in this operation" | "unknown parameter name" | "unexpected argument"
            )
        });
        // Most messages name the op already (`... of `conv``); the others get it in front.
        let message = if e.message.contains(&format!("`{op}`")) {
            e.message.clone()
        } else {
            format!("{op}: {}", e.message)
        };
        let mut err = Error::new(
            Some(at),
            match detail {
                Some(d) => format!("{message}: {d}"),
                None => message,
            },
        );
        let g = self.inner.borrow();
        let tensors: Vec<String> = args
            .iter()
            .enumerate()
            .filter_map(|(i, (n, a))| match a {
                SArg::Value(v) => Some(format!(
                    "{} = `{}`: {}",
                    n.clone().unwrap_or_else(|| format!("argument {}", i + 1)),
                    g.values[*v].ident,
                    g.values[*v].ty
                )),
                _ => None,
            })
            .collect();
        if !tensors.is_empty() {
            err = err.note(format!("tensors: {}", tensors.join(", ")));
        }
        for n in e.notes {
            err = err.note(n);
        }
        err
    }

    /// Defines a fragment on this graph from a sub-graph built in Rust: `body` is a graph
    /// whose inputs are the fragment's tensor parameters (in order) and whose outputs are
    /// its results. The fragment is written out as an NNEF `fragment`, and called with
    /// [`call`](Graph::call) like any other. Parameters keep the extents the body was
    /// checked with only as examples: each call is checked again with its own shapes.
    /// Attribute parameters are not supported (fix attributes inside the body).
    #[track_caller]
    pub fn define_fragment(&self, name: &str, body: &Graph) -> Result<()> {
        let at = Location::caller();
        if !valid_ident(name) {
            return Err(Error::new(
                Some(at),
                format!("`{name}` cannot name a fragment"),
            ));
        }
        let doc = body.finish().map_err(|mut e| {
            e.message = format!("fragment `{name}`: {}", e.message);
            // A whole-body error (no outputs) is reported at the definition.
            e.location.get_or_insert(at);
            e
        })?;
        if !doc.variables.is_empty() {
            return Err(Error::new(
                Some(at),
                format!("fragment `{name}` uses variables, which fragments cannot declare"),
            )
            .note("pass weights as tensor parameters"));
        }
        let text = body.fragment_text(name, &doc);
        let mut fragments = self.inner.borrow().fragments.clone();
        fragments.extend(body.inner.borrow().fragments.iter().cloned());
        fragments.push(text);
        let lib = Library::new(&fragments.join("\n")).map_err(|e| {
            Error::new(Some(at), format!("fragment `{name}` is not valid NNEF"))
                .note(e.trim_end().to_string())
        })?;
        let mut g = self.inner.borrow_mut();
        g.fragments = fragments;
        g.lib = Rc::new(lib);
        Ok(())
    }

    /// Replaces the graph's user fragments with `fragments` (NNEF `fragment` definitions,
    /// in order), checked by building their library: how a loaded document's own
    /// fragments are registered ([`from_nnef`]).
    pub(crate) fn set_fragments(&self, fragments: Vec<String>) -> std::result::Result<(), String> {
        let lib = Library::new(&fragments.join("\n"))?;
        let mut g = self.inner.borrow_mut();
        g.fragments = fragments;
        g.lib = Rc::new(lib);
        Ok(())
    }

    fn fragment_text(&self, name: &str, doc: &Document) -> String {
        let g = self.inner.borrow();
        let params: Vec<String> = g
            .inputs
            .iter()
            .map(|&i| {
                format!(
                    "{}: tensor<{}>",
                    g.values[i].ident,
                    prim_name(g.values[i].ty.dtype)
                )
            })
            .collect();
        let results: Vec<String> = g
            .outputs
            .iter()
            .map(|(n, i)| format!("{n}: tensor<{}>", prim_name(g.values[*i].ty.dtype)))
            .collect();
        let mut s = format!(
            "fragment {name}( {} ) -> ( {} )\n{{\n",
            params.join(", "),
            results.join(", ")
        );
        for line in &doc.body {
            if !line.contains("= external<") {
                s.push_str("    ");
                s.push_str(line);
                s.push('\n');
            }
        }
        s.push_str("}\n");
        s
    }

    /// Checks the whole graph and returns its NNEF document. Statements are sorted so that
    /// every value is defined before use (placeholders make out-of-order wiring
    /// possible); statements that no output depends on are dropped and, like inputs no
    /// output reads, reported in [`Document::warnings`]. Errors: no outputs, a
    /// placeholder never connected, a value that depends on itself.
    pub fn finish(&self) -> Result<Document> {
        let g = self.inner.borrow();
        if g.outputs.is_empty() {
            return Err(
                Error::new(None, format!("graph `{}` has no outputs", g.name))
                    .note("mark results with Graph::output(name, &value)"),
            );
        }
        // Resolve placeholders to what they are connected to.
        let resolve = |mut v: usize| -> Result<usize> {
            let mut seen = 0;
            while let Def::Placeholder(c) = &g.values[v].def {
                match c {
                    Some(t) => v = *t,
                    None => {
                        return Err(Error::new(
                            Some(g.values[v].caller),
                            format!("placeholder `{}` is never connected", g.values[v].ident),
                        )
                        .note("connect it with Graph::connect(&placeholder, &value)"));
                    }
                }
                seen += 1;
                if seen > g.values.len() {
                    return Err(Error::new(
                        Some(g.values[v].caller),
                        "placeholders are connected to each other in a circle".to_string(),
                    ));
                }
            }
            Ok(v)
        };
        // Statement dependencies, through placeholders.
        let mut deps: Vec<Vec<usize>> = Vec::with_capacity(g.stmts.len());
        for s in &g.stmts {
            let mut ids = Vec::new();
            for (_, a) in &s.args {
                sarg_values(a, &mut ids);
            }
            let mut d = Vec::new();
            for v in ids {
                let r = resolve(v)?;
                if let Def::Stmt(k) = g.values[r].def {
                    d.push(k);
                }
            }
            deps.push(d);
        }
        // Live statements: reachable from the outputs.
        let mut live = vec![false; g.stmts.len()];
        let mut used_values = HashSet::new();
        let mut stack: Vec<usize> = Vec::new();
        for (_, o) in &g.outputs {
            let r = resolve(*o)?;
            used_values.insert(r);
            if let Def::Stmt(k) = g.values[r].def {
                stack.push(k);
            }
        }
        while let Some(k) = stack.pop() {
            if std::mem::replace(&mut live[k], true) {
                continue;
            }
            let mut ids = Vec::new();
            for (_, a) in &g.stmts[k].args {
                sarg_values(a, &mut ids);
            }
            for v in ids {
                let r = resolve(v)?;
                used_values.insert(r);
            }
            stack.extend(deps[k].iter().copied());
        }
        // Depth-first topological order of the live statements; a back edge is a cycle.
        let mut order = Vec::new();
        let mut state = vec![0u8; g.stmts.len()]; // 0 new, 1 on the path, 2 done
        for root in 0..g.stmts.len() {
            if !live[root] || state[root] != 0 {
                continue;
            }
            let mut path: Vec<(usize, usize)> = vec![(root, 0)];
            state[root] = 1;
            while let Some(&mut (k, ref mut next)) = path.last_mut() {
                if *next < deps[k].len() {
                    let d = deps[k][*next];
                    *next += 1;
                    match state[d] {
                        0 => {
                            state[d] = 1;
                            path.push((d, 0));
                        }
                        1 => {
                            let start = path.iter().position(|(p, _)| *p == d).unwrap_or(0);
                            let chain: Vec<String> = path[start..]
                                .iter()
                                .map(|(p, _)| {
                                    let mut ids = Vec::new();
                                    g.stmts[*p].results.ids(&mut ids);
                                    format!(
                                        "`{}` ({})",
                                        ids.first().map_or("?", |i| g.values[*i].ident.as_str()),
                                        g.stmts[*p].op
                                    )
                                })
                                .collect();
                            return Err(Error::new(
                                Some(g.stmts[d].caller),
                                "the graph has a cycle: a value depends on itself",
                            )
                            .note(format!("cycle: {} → back to the first", chain.join(" → ")))
                            .note("a placeholder was connected to a value computed from it"));
                        }
                        _ => {}
                    }
                } else {
                    state[k] = 2;
                    order.push(k);
                    path.pop();
                }
            }
        }
        let mut warnings = Vec::new();
        for &i in &g.inputs {
            if !used_values.contains(&i) {
                warnings.push(format!(
                    "input `{}` is not used by any output",
                    g.values[i].ident
                ));
            }
        }
        for (k, s) in g.stmts.iter().enumerate() {
            if !live[k] {
                let mut ids = Vec::new();
                s.results.ids(&mut ids);
                let names: Vec<&str> = ids.iter().map(|i| g.values[*i].ident.as_str()).collect();
                warnings.push(format!(
                    "`{}` ({}, {}:{}) is not used by any output and was dropped",
                    names.join("`, `"),
                    s.op,
                    s.caller.file(),
                    s.caller.line()
                ));
            }
        }
        // The text.
        let ident = |v: usize| -> Result<String> { Ok(g.values[resolve(v)?].ident.clone()) };
        let mut body = Vec::new();
        for &i in &g.inputs {
            let ty = &g.values[i].ty;
            let dims: Vec<String> = ty
                .dims
                .iter()
                .map(|d| d.known().map_or("1".to_string(), |n| n.to_string()))
                .collect();
            body.push(format!(
                "{} = external<{}>(shape = [{}]);",
                g.values[i].ident,
                prim_name(ty.dtype),
                dims.join(", ")
            ));
        }
        let mut variables = BTreeMap::new();
        for (i, v) in g.values.iter().enumerate() {
            if let Def::Variable(label) = &v.def
                && used_values.contains(&i)
            {
                let dims: Vec<String> =
                    v.ty.dims
                        .iter()
                        .map(|d| d.known().unwrap_or(1).to_string())
                        .collect();
                body.push(format!(
                    "{} = variable<{}>(shape = [{}], label = '{}');",
                    v.ident,
                    prim_name(v.ty.dtype),
                    dims.join(", "),
                    label
                ));
                variables.insert(label.clone(), g.variables[label].clone());
            }
        }
        for &k in &order {
            let s = &g.stmts[k];
            let mut args = Vec::new();
            for (n, a) in &s.args {
                let text = render_arg(a, &ident)?;
                args.push(match n {
                    Some(n) => format!("{n} = {text}"),
                    None => text,
                });
            }
            let generic = s
                .generic
                .map_or(String::new(), |d| format!("<{}>", prim_name(d)));
            body.push(format!(
                "{} = {}{generic}({});",
                render_pattern(&s.results, &g.values),
                s.op,
                args.join(", ")
            ));
        }
        let inputs: Vec<(String, TensorType)> = g
            .inputs
            .iter()
            .map(|&i| (g.values[i].ident.clone(), g.values[i].ty.clone()))
            .collect();
        let outputs: Vec<(String, TensorType)> = g
            .outputs
            .iter()
            .map(|(n, i)| (n.clone(), g.values[*i].ty.clone()))
            .collect();
        Ok(Document {
            name: g.name.clone(),
            fragments: g.fragments.clone(),
            body,
            inputs,
            outputs,
            variables,
            warnings,
        })
    }
}

impl Outputs {
    fn single_at(o: Outputs, at: &'static Location<'static>) -> Result<Value> {
        match o {
            Outputs::One(v) => Ok(v),
            other => Err(Error::new(
                Some(at),
                format!(
                    "expected one tensor, but the op returned {}",
                    other.describe()
                ),
            )
            .note("take the results apart with `values()` (arrays) or by matching the tuple")),
        }
    }
}

fn sarg_values(a: &SArg, out: &mut Vec<usize>) {
    match a {
        SArg::Value(v) => out.push(*v),
        SArg::Array(xs) | SArg::Tuple(xs) => xs.iter().for_each(|x| sarg_values(x, out)),
        _ => {}
    }
}

fn prim_name(d: DType) -> &'static str {
    value::prim_name(value::prim_of_dtype(d))
}

/// A scalar as an NNEF literal that reads back as the same `f64` (always with a `.` or an
/// exponent, so it is not read as an integer).
pub(crate) fn scalar_literal(x: f64) -> String {
    let s = format!("{x:?}");
    if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
        s
    } else {
        format!("{s}.0")
    }
}

fn render_arg(a: &SArg, ident: &dyn Fn(usize) -> Result<String>) -> Result<String> {
    Ok(match a {
        SArg::Value(v) => ident(*v)?,
        SArg::Integer(i) => i.to_string(),
        SArg::Scalar(x) => scalar_literal(*x),
        SArg::Logical(b) => b.to_string(),
        SArg::Str(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        SArg::Array(xs) => {
            let parts: Vec<String> = xs
                .iter()
                .map(|x| render_arg(x, ident))
                .collect::<Result<_>>()?;
            format!("[{}]", parts.join(", "))
        }
        SArg::Tuple(xs) => {
            let parts: Vec<String> = xs
                .iter()
                .map(|x| render_arg(x, ident))
                .collect::<Result<_>>()?;
            format!("({})", parts.join(", "))
        }
    })
}

fn render_pattern(p: &Pattern, values: &[ValueInfo]) -> String {
    match p {
        Pattern::One(v) => values[*v].ident.clone(),
        Pattern::Array(xs) => {
            let parts: Vec<String> = xs.iter().map(|x| render_pattern(x, values)).collect();
            format!("[{}]", parts.join(", "))
        }
        Pattern::Tuple(xs) => {
            let parts: Vec<String> = xs.iter().map(|x| render_pattern(x, values)).collect();
            format!("({})", parts.join(", "))
        }
    }
}

/// A finished graph: NNEF text and the variables' data, checked. Write it, compile it,
/// or load it.
#[derive(Clone, Debug)]
pub struct Document {
    /// The graph's name.
    pub name: String,
    fragments: Vec<String>,
    /// The statements of the graph body, one per line, in a valid order.
    body: Vec<String>,
    /// The inputs with their types (extents may be open).
    pub inputs: Vec<(String, TensorType)>,
    /// The outputs with their types.
    pub outputs: Vec<(String, TensorType)>,
    /// Variable data by label.
    pub variables: BTreeMap<String, Tensor>,
    /// Inputs nothing reads and statements dropped because no output depends on them.
    pub warnings: Vec<String>,
}

impl Document {
    /// The NNEF text (`graph.nnef`). An open extent of an input is written as 1 (NNEF
    /// has no open extents); [`compile`](Document::compile) leaves it open.
    pub fn text(&self) -> String {
        let mut s = String::from("version 1.0;\n");
        if !self.fragments.is_empty() {
            s.push_str("extension KHR_enable_fragment_definitions;\n\n");
            for f in &self.fragments {
                s.push_str(f);
                s.push('\n');
            }
        } else {
            s.push('\n');
        }
        let names = |xs: &[(String, TensorType)]| -> String {
            xs.iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        s.push_str(&format!(
            "graph {}( {} ) -> ( {} )\n{{\n",
            graph_ident(&self.name),
            names(&self.inputs),
            names(&self.outputs)
        ));
        for line in &self.body {
            s.push_str("    ");
            s.push_str(line);
            s.push('\n');
        }
        s.push_str("}\n");
        s
    }

    /// Writes a model folder: `graph.nnef` and one `.dat` file per variable (at its
    /// label). Readable by nnefc and by the Khronos tools.
    pub fn write(&self, dir: &Path) -> std::result::Result<(), std::io::Error> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("graph.nnef"), self.text())?;
        for (label, t) in &self.variables {
            let path = dir.join(format!("{label}.dat"));
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            crate::datfile::write(&path, t).map_err(std::io::Error::other)?;
        }
        Ok(())
    }

    /// The session options this document needs on top of `base`: open input extents as
    /// shape overrides (an open leading extent becomes a run-time batch).
    fn options(&self, base: &session::Options) -> session::Options {
        let mut opts = base.clone();
        for (name, ty) in &self.inputs {
            if ty.dims.iter().any(|d| matches!(d, Dim::Unknown)) {
                opts.front
                    .input_shapes
                    .entry(name.clone())
                    .or_insert_with(|| ty.dims.iter().map(|d| d.known()).collect());
            }
        }
        opts
    }

    /// Compiles through the session (the same pipeline as a model folder), with the graph's
    /// name made a C identifier as the symbol prefix unless `prefix` is given.
    pub fn compile(
        &self,
        opts: &session::Options,
        prefix: Option<&str>,
    ) -> std::result::Result<session::Compiled, session::Error> {
        let text = self.text();
        let vars = &self.variables;
        let lookup = move |label: &str| vars.get(label).cloned();
        session::compile_graph("graph.nnef", &text, &lookup, &self.options(opts), prefix)
    }

    /// Compiles with default options and loads the code into this process, ready to
    /// [`run`](crate::exec::LoadedModel::run) on [`Tensor`]s. See [`crate::exec`] for the
    /// link requirement (`-rdynamic`).
    pub fn load(&self) -> std::result::Result<crate::exec::LoadedModel, String> {
        let compiled = self
            .compile(&session::Options::default(), None)
            .map_err(|e| e.render())?;
        crate::exec::LoadedModel::load(&compiled.artifacts).map_err(|e| e.to_string())
    }
}

/// A graph name as an NNEF identifier.
fn graph_ident(name: &str) -> String {
    if valid_ident(name) {
        name.to_string()
    } else {
        let s = session::c_identifier(name);
        if valid_ident(&s) { s } else { format!("g_{s}") }
    }
}

/// The handles an op function was given: finds the graph of the first tensor argument.
#[track_caller]
pub(crate) fn graph_of(op: &str, args: &[(Option<&str>, Arg)]) -> Result<Graph> {
    fn find(a: &Arg) -> Option<&Value> {
        match a {
            Arg::Value(v) => Some(v),
            Arg::Array(xs) | Arg::Tuple(xs) => xs.iter().find_map(find),
            _ => None,
        }
    }
    // Taken here: a closure does not see `#[track_caller]`'s location.
    let at = Location::caller();
    args.iter()
        .find_map(|(_, a)| find(a))
        .map(Value::graph)
        .ok_or_else(|| {
            Error::new(
                Some(at),
                format!(
                    "{op}: no argument is a tensor of a graph, so there is no graph to add it to"
                ),
            )
            .note("pass at least one Value, or use Graph::call")
        })
}

/// Calls `op` on the graph of its first tensor argument (what the generated functions use).
#[track_caller]
pub fn invoke(op: &str, generic: Option<DType>, args: Vec<(Option<&str>, Arg)>) -> Result<Outputs> {
    let g = graph_of(op, &args)?;
    g.call(op, generic, args)
}
