//! Loading an NNEF model into the graph builder: [`from_nnef`] reads a model folder,
//! `.tgz`/`.tar` archive or bare `graph.nnef` and replays its graph body, statement by
//! statement, as [`Graph`] calls, so that a loaded model can be extended, rewired or
//! written out again like one built in Rust ([`from_nnef_with_values`] also returns
//! handles to the file's values by identifier).
//!
//! `external`s become [`Graph::input`]s (in the order of the graph's parameters),
//! `variable`s become [`Graph::variable`]s holding the data of their `.dat` files (shape and
//! type checked against the declaration), every other invocation becomes a
//! [`Graph::call`] and is checked exactly as a call written in Rust. Nested invocations in
//! arguments (compositional syntax) are called first and their results passed on. The
//! document's own `fragment` definitions are registered on the graph as written.
//!
//! What the builder cannot represent is refused with an error naming the file, line and
//! column of the statement: operator expressions (`a + b`), `if`/`else`, comprehensions,
//! subscripts and built-in functions in the graph body; fragments that need
//! `KHR_enable_operator_expressions` (a finished document declares only fragment
//! definitions); quantized data and `graph.quant`. Identifiers of the file are not kept
//! in the written text: the builder names values itself (inputs, outputs and variable
//! labels keep theirs). Statements are replayed in file order, so a dead statement's
//! warning from [`Graph::finish`] points at the caller of `from_nnef`, not at the file.

use super::{Arg, Error, Graph, Outputs, Result, Value};
use nnefc_compiler::diag::{FileId, SourceMap, Span};
use nnefc_compiler::front::dat::read_dat;
use nnefc_compiler::front::index::{EXT_FRAGMENTS, EXT_OPERATORS, check_features};
use nnefc_compiler::front::load::{ModelSource, load_model};
use nnefc_compiler::front::syntax::ast::{
    Assignment, Document as Ast, Expr, ExprKind, Literal, PrimType, TypeSpec, UnaryOp,
};
use nnefc_compiler::front::syntax::parse_document;
use nnefc_compiler::front::{FRONT_STACK_BYTES, syntax::ast::Arg as AstArg};
use nnefc_compiler::ir::DType;
use std::collections::{BTreeMap, HashMap};
use std::panic::Location;
use std::path::Path;

/// How deeply arguments may nest (arrays in arrays, invocations in invocations) before
/// the loader refuses: it recurses on the caller's stack, and real models nest a few
/// levels at most. The parser's own limit is far higher, for its large stack.
const MAX_ARG_DEPTH: usize = 64;

/// Loads the NNEF model at `path` (a folder, a `.tgz`/`.tar`, or a bare `graph.nnef`,
/// which then may declare no variables) into a new [`Graph`] named like the document's
/// graph. Every statement is checked as the builder checks its calls; an error names the
/// file, line and column of the offending statement, and its `location` is the caller's.
#[track_caller]
pub fn from_nnef(path: &Path) -> Result<Graph> {
    from_nnef_with_values(path).map(|(g, _)| g)
}

/// [`from_nnef`], with handles to the values of the file by identifier (those that name
/// one tensor), so that the loaded graph can be extended from Rust: new ops on them, new
/// outputs.
#[track_caller]
pub fn from_nnef_with_values(path: &Path) -> Result<(Graph, BTreeMap<String, Value>)> {
    let at = Location::caller();
    let src = load_model(path).map_err(|e| {
        Error::new(
            Some(at),
            format!("cannot load the model {}: {e}", path.display()),
        )
    })?;
    if let Some(q) = &src.quant {
        return Err(Error::new(
            Some(at),
            format!(
                "{}: quantization parameters cannot be loaded into the graph builder",
                q.path
            ),
        )
        .note("the builder has no quantized tensors; compile the model folder directly"));
    }
    let mut sources = SourceMap::new();
    let file = sources.add(src.graph.path.clone(), src.graph.text.clone());
    let doc = parse(file, &src.graph.text, &sources, at)?;
    let loader = Loader {
        src: &src,
        sources: &sources,
        file,
        at,
    };
    loader.load(&doc)
}

/// Parses on a thread with the front end's large stack: the parser recurses once per
/// nesting level, which may go deeper than a test thread's stack allows.
fn parse(
    file: FileId,
    text: &str,
    sources: &SourceMap,
    at: &'static Location<'static>,
) -> Result<Ast> {
    let result = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("nnefc-parse".into())
            .stack_size(FRONT_STACK_BYTES)
            .spawn_scoped(s, || parse_document(file, text))
            .map(|h| h.join())
    });
    match result {
        Ok(Ok(Ok(doc))) => Ok(doc),
        Ok(Ok(Err(d))) => Err(Error::new(
            Some(at),
            format!("{}: the document does not parse", sources.name(file)),
        )
        .note(d.render(sources).trim_end().to_string())),
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(e) => Err(Error::new(
            Some(at),
            format!("cannot start a thread to parse {}: {e}", sources.name(file)),
        )),
    }
}

struct Loader<'a> {
    src: &'a ModelSource,
    sources: &'a SourceMap,
    file: FileId,
    at: &'static Location<'static>,
}

/// What an identifier of the graph body stands for: the results of its statement.
type Bindings = HashMap<String, Outputs>;

impl Loader<'_> {
    /// `path:line:col` of a span.
    fn pos(&self, span: Span) -> String {
        let (line, col) = self.sources.line_col(self.file, span.start);
        format!("{}:{line}:{col}", self.sources.name(self.file))
    }

    /// An error at a statement of the file.
    fn err(&self, span: Span, message: impl Into<String>) -> Error {
        Error::new(
            Some(self.at),
            format!("{}: {}", self.pos(span), message.into()),
        )
    }

    /// A builder error raised while replaying a statement, placed at that statement.
    fn at_stmt(&self, span: Span, mut e: Error) -> Error {
        e.location = Some(self.at);
        e.message = format!("{}: {}", self.pos(span), e.message);
        // The builder's notes name its own identifiers (`t3`); the file's are here.
        e.notes
            .insert(0, format!("statement: `{}`", self.snippet(span)));
        e
    }

    /// The statement's text, shortened, for notes.
    fn snippet(&self, span: Span) -> String {
        let text = self.sources.text(self.file);
        let s = text
            .get(span.start as usize..span.end as usize)
            .unwrap_or("");
        let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
        if s.chars().count() > 80 {
            format!("{}…", s.chars().take(79).collect::<String>())
        } else {
            s
        }
    }

    #[track_caller]
    fn load(&self, doc: &Ast) -> Result<(Graph, BTreeMap<String, Value>)> {
        let name = self.sources.name(self.file).to_string();
        let Some(gdef) = &doc.graph else {
            return Err(Error::new(
                Some(self.at),
                format!("{name}: the document has no `graph`"),
            ));
        };
        // What the builder can replay is checked first, so that `y = x + 1.0;` is
        // reported as such and not as a missing extension.
        for a in &gdef.body {
            self.check_representable(a)?;
        }
        check_features(doc).map_err(|d| {
            Error::new(
                Some(self.at),
                format!("{name}: the document is not valid NNEF"),
            )
            .note(d.render(self.sources).trim_end().to_string())
        })?;
        let g = Graph::new(&gdef.name.name);
        self.register_fragments(doc, &g)?;

        // Inputs in the order of the graph's parameters (the compiled model's interface),
        // wherever their `external` statements are.
        let mut externals: HashMap<&str, &Assignment> = HashMap::new();
        for a in &gdef.body {
            if let ExprKind::Invocation { name, .. } = &a.rhs.kind
                && name.name == "external"
            {
                let ExprKind::Ident(id) = &a.lhs.kind else {
                    return Err(self.err(a.span, "an `external` defines one identifier"));
                };
                if !gdef.params.iter().any(|p| &p.name == id) {
                    return Err(self
                        .err(
                            a.span,
                            format!("`{id}` is declared `external` but is not an input of graph `{}`", gdef.name.name),
                        )
                        .note("list it in the graph's parameters: `graph name( ..., inputs ) -> ( ... )`"));
                }
                if externals.insert(id, a).is_some() {
                    return Err(self.err(a.span, format!("input `{id}` is declared twice")));
                }
            }
        }
        let mut bindings: Bindings = HashMap::new();
        for p in &gdef.params {
            let Some(a) = externals.get(p.name.as_str()) else {
                return Err(self.err(
                    p.span,
                    format!("input `{}` has no `external` statement", p.name),
                ));
            };
            let v = self.external(&g, a)?;
            bindings.insert(p.name.clone(), Outputs::One(v));
        }
        for a in &gdef.body {
            if matches!(&a.rhs.kind, ExprKind::Invocation { name, .. } if name.name == "external") {
                continue;
            }
            let out = self.eval_invocation(&g, &a.rhs, &bindings, a.span, 0)?;
            self.bind(&a.lhs, out, &mut bindings, a.span)?;
        }
        for r in &gdef.results {
            let v = match bindings.get(&r.name) {
                Some(Outputs::One(v)) => v.clone(),
                Some(other) => {
                    return Err(self.err(
                        r.span,
                        format!(
                            "output `{}` is {}, and a graph output is one tensor",
                            r.name,
                            other.describe()
                        ),
                    ));
                }
                None => {
                    return Err(self.err(
                        r.span,
                        format!("output `{}` is not defined in the graph body", r.name),
                    ));
                }
            };
            g.output(&r.name, &v).map_err(|e| self.at_stmt(r.span, e))?;
        }
        let values = bindings
            .into_iter()
            .filter_map(|(k, o)| match o {
                Outputs::One(v) => Some((k, v)),
                _ => None,
            })
            .collect();
        Ok((g, values))
    }

    /// The user's fragments, registered as written. A finished document declares only
    /// `KHR_enable_fragment_definitions`, so a fragment that needs operator expressions
    /// is refused here rather than when the document is compiled.
    fn register_fragments(&self, doc: &Ast, g: &Graph) -> Result<()> {
        if doc.fragments.is_empty() {
            return Ok(());
        }
        let operators = doc
            .extensions
            .iter()
            .any(|e| e.names.iter().any(|n| n.name == EXT_OPERATORS));
        let text = self.sources.text(self.file);
        let mut texts = Vec::new();
        for f in &doc.fragments {
            if operators {
                let mut alone = doc.clone();
                alone.graph = None;
                alone.fragments = vec![f.clone()];
                for e in &mut alone.extensions {
                    e.names.retain(|n| n.name == EXT_FRAGMENTS);
                }
                if check_features(&alone).is_err() {
                    return Err(self
                        .err(
                            f.span,
                            format!(
                                "fragment `{}` uses operator expressions, which the graph builder cannot write",
                                f.name.name
                            ),
                        )
                        .note("a finished document declares only KHR_enable_fragment_definitions; write the body with invocations (`add(a, b)` for `a + b`)"));
                }
            }
            let t = text
                .get(f.span.start as usize..f.span.end as usize)
                .unwrap_or_default();
            texts.push(t.to_string());
        }
        g.set_fragments(texts).map_err(|e| {
            Error::new(
                Some(self.at),
                format!(
                    "{}: the fragment definitions are not valid",
                    self.sources.name(self.file)
                ),
            )
            .note(e.trim_end().to_string())
        })
    }

    /// Refuses a statement the builder cannot replay: anything but invocations whose
    /// arguments are literals, identifiers, arrays, tuples and invocations.
    fn check_representable(&self, a: &Assignment) -> Result<()> {
        if !matches!(a.rhs.kind, ExprKind::Invocation { .. }) {
            return Err(self.unsupported(a, &a.rhs));
        }
        let mut stack = vec![(&a.rhs, 0usize)];
        while let Some((e, depth)) = stack.pop() {
            if depth > MAX_ARG_DEPTH {
                return Err(self.err(
                    a.span,
                    format!("arguments are nested more than {MAX_ARG_DEPTH} levels deep"),
                ));
            }
            match &e.kind {
                ExprKind::Literal(_) | ExprKind::Ident(_) => {}
                ExprKind::Array(xs) | ExprKind::Tuple(xs) => {
                    stack.extend(xs.iter().map(|x| (x, depth + 1)));
                }
                ExprKind::Invocation { args, .. } => {
                    stack.extend(args.iter().map(|x| (&x.value, depth + 1)));
                }
                ExprKind::Unary {
                    op: UnaryOp::Neg | UnaryOp::Plus,
                    operand,
                } if matches!(
                    operand.kind,
                    ExprKind::Literal(Literal::Integer(_) | Literal::Scalar(_))
                ) => {}
                _ => return Err(self.unsupported(a, e)),
            }
        }
        Ok(())
    }

    fn unsupported(&self, a: &Assignment, e: &Expr) -> Error {
        let what = match &e.kind {
            ExprKind::Unary { .. } | ExprKind::Binary { .. } => "an operator expression",
            ExprKind::IfElse { .. } => "an `if`/`else` expression",
            ExprKind::Comprehension { .. } => "a comprehension",
            ExprKind::Subscript { .. } => "a subscript",
            ExprKind::Builtin { .. } => "a built-in function",
            ExprKind::Literal(_) | ExprKind::Ident(_) => {
                "a value that is not computed by an invocation"
            }
            ExprKind::Array(_) | ExprKind::Tuple(_) => "an array or tuple of values",
            ExprKind::Invocation { .. } => "an invocation",
        };
        self.err(
            a.span,
            format!(
                "the graph builder can only load invocations, and this statement has {what} (`{}`)",
                self.snippet(e.span)
            ),
        )
        .note(format!("statement: `{}`", self.snippet(a.span)))
        .note("write it as invocations of stdlib fragments (`add(x, 1.0)` for `x + 1.0`), or compile the model folder directly")
    }

    #[track_caller]
    fn external(&self, g: &Graph, a: &Assignment) -> Result<Value> {
        let ExprKind::Invocation { generic, args, .. } = &a.rhs.kind else {
            return Err(self.unsupported(a, &a.rhs));
        };
        let ExprKind::Ident(name) = &a.lhs.kind else {
            return Err(self.err(a.span, "an `external` defines one identifier"));
        };
        let dtype = self.dtype(generic.as_ref(), a.span)?;
        let shape = self.shape_arg(args, a.span, "external")?;
        g.input(name, dtype, &shape)
            .map_err(|e| self.at_stmt(a.span, e))
    }

    #[track_caller]
    fn variable(
        &self,
        g: &Graph,
        generic: Option<&TypeSpec>,
        args: &[AstArg],
        span: Span,
    ) -> Result<Value> {
        let dtype = self.dtype(generic, span)?;
        let shape = self.shape_arg(args, span, "variable")?;
        let label = match self.named_or_positional(args, "label", 1) {
            Some(Expr {
                kind: ExprKind::Literal(Literal::String(s)),
                ..
            }) => s.clone(),
            _ => {
                return Err(self.err(span, "`variable` needs a string `label`"));
            }
        };
        let bytes = self
            .src
            .variable(&label)
            .map_err(|e| self.err(span, format!("{e}")))?;
        let file = self.src.variable_path(&label);
        let dat = read_dat(&bytes).map_err(|e| self.err(span, format!("{file}: {e}")))?;
        if dat.quant.is_some() || dat.item.kind.is_quantized() {
            return Err(self
                .err(span, format!("{file} holds quantized data"))
                .note("the graph builder has no quantized tensors"));
        }
        let dat = dat.conform(&shape, dtype).map_err(|e| {
            self.err(
                span,
                format!("variable `{label}` does not match its data file {file}: {e}"),
            )
        })?;
        g.variable(&label, dat.data)
            .map_err(|e| self.at_stmt(span, e))
    }

    /// `<scalar>`, `<integer>`, `<logical>`; `scalar` when absent (the default of
    /// `external` and `variable`).
    fn dtype(&self, generic: Option<&TypeSpec>, span: Span) -> Result<DType> {
        Ok(match generic {
            None | Some(TypeSpec::Prim(PrimType::Scalar, _)) => DType::F32,
            Some(TypeSpec::Prim(PrimType::Integer, _)) => DType::I32,
            Some(TypeSpec::Prim(PrimType::Logical, _)) => DType::Bool,
            Some(_) => {
                return Err(self.err(span, "a tensor's type is `scalar`, `integer` or `logical`"));
            }
        })
    }

    fn named_or_positional<'e>(
        &self,
        args: &'e [AstArg],
        name: &str,
        index: usize,
    ) -> Option<&'e Expr> {
        args.iter()
            .find(|a| a.name.as_ref().is_some_and(|n| n.name == name))
            .or_else(|| args.get(index).filter(|a| a.name.is_none()))
            .map(|a| &a.value)
    }

    /// The `shape` of `external` and `variable`: an array of non-negative integers.
    fn shape_arg(&self, args: &[AstArg], span: Span, op: &str) -> Result<Vec<usize>> {
        let bad = || {
            self.err(
                span,
                format!("`{op}` needs `shape` as an array of non-negative integer literals"),
            )
        };
        let Some(Expr {
            kind: ExprKind::Array(items),
            ..
        }) = self.named_or_positional(args, "shape", 0)
        else {
            return Err(bad());
        };
        items
            .iter()
            .map(|e| match e.kind {
                ExprKind::Literal(Literal::Integer(n)) if n >= 0 => {
                    usize::try_from(n).map_err(|_| bad())
                }
                _ => Err(bad()),
            })
            .collect()
    }

    /// Calls the invocation `e` (of statement `span`) on `g`.
    #[track_caller]
    fn eval_invocation(
        &self,
        g: &Graph,
        e: &Expr,
        bindings: &Bindings,
        span: Span,
        depth: usize,
    ) -> Result<Outputs> {
        let ExprKind::Invocation {
            name,
            generic,
            args,
        } = &e.kind
        else {
            return Err(self.err(span, "expected an invocation"));
        };
        match name.name.as_str() {
            "variable" => {
                return self
                    .variable(g, generic.as_ref(), args, span)
                    .map(Outputs::One);
            }
            "external" => {
                return Err(self.err(
                    span,
                    "an `external` is a statement of its own (`x = external(...)`), not an argument",
                ));
            }
            _ => {}
        }
        let generic = match generic {
            None => None,
            Some(t) => Some(self.dtype(Some(t), span)?),
        };
        let mut call_args: Vec<(Option<String>, Arg)> = Vec::with_capacity(args.len());
        for a in args {
            let v = self.eval_arg(g, &a.value, bindings, span, depth + 1)?;
            call_args.push((a.name.as_ref().map(|n| n.name.clone()), v));
        }
        let call_args: Vec<(Option<&str>, Arg)> = call_args
            .iter()
            .map(|(n, a)| (n.as_deref(), a.clone()))
            .collect();
        g.call(&name.name, generic, call_args)
            .map_err(|err| self.at_stmt(span, err))
    }

    #[track_caller]
    fn eval_arg(
        &self,
        g: &Graph,
        e: &Expr,
        bindings: &Bindings,
        span: Span,
        depth: usize,
    ) -> Result<Arg> {
        if depth > MAX_ARG_DEPTH {
            return Err(self.err(
                span,
                format!("arguments are nested more than {MAX_ARG_DEPTH} levels deep"),
            ));
        }
        Ok(match &e.kind {
            ExprKind::Literal(l) => literal(l, false),
            ExprKind::Unary { op, operand } => match (&operand.kind, op) {
                (
                    ExprKind::Literal(l @ (Literal::Integer(_) | Literal::Scalar(_))),
                    UnaryOp::Neg,
                ) => literal(l, true),
                (
                    ExprKind::Literal(l @ (Literal::Integer(_) | Literal::Scalar(_))),
                    UnaryOp::Plus,
                ) => literal(l, false),
                _ => return Err(self.err(span, "the graph builder can only load invocations")),
            },
            ExprKind::Ident(id) => match bindings.get(id) {
                Some(o) => outputs_arg(o),
                None => {
                    return Err(self
                        .err(span, format!("`{id}` is used before it is defined"))
                        .note(format!("statement: `{}`", self.snippet(span))));
                }
            },
            ExprKind::Array(xs) => Arg::Array(
                xs.iter()
                    .map(|x| self.eval_arg(g, x, bindings, span, depth + 1))
                    .collect::<Result<_>>()?,
            ),
            ExprKind::Tuple(xs) => Arg::Tuple(
                xs.iter()
                    .map(|x| self.eval_arg(g, x, bindings, span, depth + 1))
                    .collect::<Result<_>>()?,
            ),
            ExprKind::Invocation { .. } => {
                outputs_arg(&self.eval_invocation(g, e, bindings, span, depth + 1)?)
            }
            _ => return Err(self.err(span, "the graph builder can only load invocations")),
        })
    }

    /// Binds the left-hand side `lhs` to the results `out`, pattern by pattern.
    fn bind(&self, lhs: &Expr, out: Outputs, bindings: &mut Bindings, span: Span) -> Result<()> {
        match (&lhs.kind, out) {
            (ExprKind::Ident(id), out) => {
                if bindings.insert(id.clone(), out).is_some() {
                    return Err(self
                        .err(span, format!("`{id}` is defined twice"))
                        .note("each identifier of a graph body is assigned once"));
                }
                Ok(())
            }
            (ExprKind::Array(ps), Outputs::Array(xs))
            | (ExprKind::Tuple(ps), Outputs::Tuple(xs))
                if ps.len() == xs.len() =>
            {
                for (p, x) in ps.iter().zip(xs) {
                    self.bind(p, x, bindings, span)?;
                }
                Ok(())
            }
            (_, out) => Err(self.err(
                span,
                format!(
                    "the left-hand side `{}` does not match the results: the op returned {}",
                    self.snippet(lhs.span),
                    out.describe()
                ),
            )),
        }
    }
}

fn literal(l: &Literal, negate: bool) -> Arg {
    match l {
        Literal::Integer(i) => Arg::Integer(if negate { -*i } else { *i }),
        Literal::Scalar(x) => Arg::Scalar(if negate { -*x } else { *x }),
        Literal::Logical(b) => Arg::Logical(*b),
        Literal::String(s) => Arg::Str(s.clone()),
    }
}

/// Results passed on as an argument: one tensor, or an array / tuple of them.
fn outputs_arg(o: &Outputs) -> Arg {
    match o {
        Outputs::One(v) => Arg::Value(v.clone()),
        Outputs::Array(xs) => Arg::Array(xs.iter().map(outputs_arg).collect()),
        Outputs::Tuple(xs) => Arg::Tuple(xs.iter().map(outputs_arg).collect()),
    }
}
