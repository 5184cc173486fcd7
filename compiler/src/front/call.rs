//! Type and shape inference of one fragment invocation outside a document: what the
//! graph builder (`nnefc::graph`) runs at every op call so that a wrong wiring is
//! reported where it is written, not when the whole graph is compiled.
//!
//! A [`Library`] is the fragment table of the stdlib plus a document's own fragments.
//! [`Library::infer`] binds the arguments exactly as an invocation in a graph body would
//! (`expand::Evaluator::invoke`: positional and named arguments, defaults, the generic
//! `?`, coercions, the op's shape rules, compound bodies inlined), with each tensor
//! argument standing for a graph input of its type, and returns the types of the
//! results. It builds nothing that outlives the call and knows nothing of the builder's
//! handles; the builder lowers its finished document through the ordinary front end.

use super::eval::Evaluator;
use super::index::FragmentTable;
use super::quantize::VarData;
use super::syntax::ast::{Document, FragmentDef, Ident};
use super::value::Value;
use super::{FrontOptions, STDLIB, expand::ArgVal, syntax};
use crate::diag::{Diagnostic, SourceMap, Span};
use crate::ir::{DType, Dim, TensorType};

/// One argument of an invocation: a tensor of a known type, or an attribute value
/// (which may itself hold tensors, as `concat`'s array does).
#[derive(Clone, Debug, PartialEq)]
pub enum CallArg {
    Tensor(TensorType),
    Integer(i64),
    Scalar(f64),
    Logical(bool),
    Str(String),
    Array(Vec<CallArg>),
    Tuple(Vec<CallArg>),
}

/// The results of an invocation, shaped as the fragment declares them: one tensor, an
/// array of tensors (`split`), or a tuple of these (`max_pool_with_index`).
#[derive(Clone, Debug, PartialEq)]
pub enum CallResult {
    Tensor(TensorType),
    Array(Vec<CallResult>),
    Tuple(Vec<CallResult>),
}

/// Why an invocation is wrong: the front end's diagnostic, without a source position
/// (the builder attaches its caller's).
#[derive(Clone, Debug, PartialEq)]
pub struct CallError {
    /// The diagnostic's message, e.g. "wrong type for argument `stride` of `conv`".
    pub message: String,
    /// What the primary label said ("expected `integer[]`, found `scalar`"), if any.
    pub detail: Option<String>,
    /// The diagnostic's notes, and the labels of the fragments it was inlined through.
    pub notes: Vec<String>,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        if let Some(d) = &self.detail {
            write!(f, ": {d}")?;
        }
        for n in &self.notes {
            write!(f, "\n  note: {n}")?;
        }
        Ok(())
    }
}

impl From<Diagnostic> for CallError {
    fn from(d: Diagnostic) -> CallError {
        let mut notes: Vec<String> = d
            .secondary
            .iter()
            .map(|l| l.message.clone())
            .filter(|m| !m.is_empty())
            .collect();
        notes.extend(d.notes);
        CallError {
            message: d.message,
            detail: d.primary.map(|l| l.message).filter(|m| !m.is_empty()),
            notes,
        }
    }
}

/// The stdlib and a document's fragments, ready to check invocations.
pub struct Library {
    table: FragmentTable,
    /// The user's fragment definitions, parsed (for signatures).
    user: Document,
    stdlib: Document,
}

impl Library {
    /// The stdlib with the fragments of `fragments`, NNEF text holding only `fragment`
    /// definitions (no `version` line, no graph). Errors are rendered against that text.
    pub fn new(fragments: &str) -> Result<Library, String> {
        let mut sources = SourceMap::new();
        let std_file = sources.add("<stdlib>/stdlib.nnef", STDLIB);
        let stdlib = syntax::parse_library(std_file, STDLIB).map_err(|d| d.render(&sources))?;
        let user_file = sources.add("<fragments>", fragments);
        let user = syntax::parse_library(user_file, fragments).map_err(|d| d.render(&sources))?;
        if let Some(f) = user.fragments.iter().find(|f| f.body.is_none()) {
            return Err(format!(
                "fragment `{}` has no body: only the stdlib declares primitives",
                f.name.name
            ));
        }
        let table = FragmentTable::build(&stdlib, &user).map_err(|d| d.render(&sources))?;
        Ok(Library {
            table,
            user,
            stdlib,
        })
    }

    /// Every fragment of the stdlib, in the order `stdlib.nnef` declares them.
    pub fn stdlib_fragments(&self) -> &[FragmentDef] {
        &self.stdlib.fragments
    }

    /// The fragments of the user's text, in order.
    pub fn user_fragments(&self) -> &[FragmentDef] {
        &self.user.fragments
    }

    /// The definition of fragment `name`.
    pub fn fragment(&self, name: &str) -> Option<&FragmentDef> {
        self.table.get(name).map(|f| &f.def)
    }

    /// Whether `name` is a fragment of this library.
    pub fn has(&self, name: &str) -> bool {
        self.table.get(name).is_some()
    }

    /// The known name closest to `name`, for "did you mean".
    pub fn suggest(&self, name: &str) -> Option<&str> {
        self.table.suggest(name)
    }

    /// Binds `args` to fragment `name` (with `generic` as `<T>` when given) and infers
    /// the result types. Runs on the front end's large stack (a user fragment may
    /// recurse).
    pub fn infer(
        &self,
        name: &str,
        generic: Option<DType>,
        args: &[(Option<String>, CallArg)],
    ) -> Result<CallResult, CallError> {
        let run = || -> Result<Result<CallResult, CallError>, super::FrontError> {
            Ok(self.infer_here(name, generic, args))
        };
        match super::on_front_stack(run) {
            Ok(r) => r,
            Err(e) => Err(CallError {
                message: e.render(),
                detail: None,
                notes: Vec::new(),
            }),
        }
    }

    fn infer_here(
        &self,
        name: &str,
        generic: Option<DType>,
        args: &[(Option<String>, CallArg)],
    ) -> Result<CallResult, CallError> {
        let mut sources = SourceMap::new();
        let file = sources.add("<call>", String::new());
        let span = Span::new(file, 0, 0);
        let opts = FrontOptions::default();
        let no_variables = |_: &str| VarData::Missing;
        let mut ev = Evaluator::new(&self.table, "call", &opts, &no_variables);
        let frag = ev.lookup(&Ident {
            name: name.into(),
            span,
        })?;
        let mut vals = Vec::with_capacity(args.len());
        for (i, (arg_name, a)) in args.iter().enumerate() {
            let value = to_value(&mut ev, a, &mut vec![i]);
            vals.push(ArgVal {
                name: arg_name.as_ref().map(|n| Ident {
                    name: n.clone(),
                    span,
                }),
                value,
                span,
            });
        }
        let explicit = generic.map(super::value::prim_of_dtype);
        if let Some(p) = explicit
            && frag.def.generic.is_none()
        {
            return Err(CallError {
                message: format!("`{name}` is not generic"),
                detail: Some(format!(
                    "a type (`{}`) was given for it",
                    super::value::prim_name(p)
                )),
                notes: Vec::new(),
            });
        }
        let v = ev.invoke(frag, explicit, vals, span, span)?;
        from_value(&ev, &v).ok_or_else(|| CallError {
            message: format!("`{name}` does not return tensors"),
            detail: None,
            notes: Vec::new(),
        })
    }
}

fn to_value(ev: &mut Evaluator<'_>, a: &CallArg, path: &mut Vec<usize>) -> Value {
    match a {
        CallArg::Tensor(t) => {
            let name: Vec<String> = path.iter().map(usize::to_string).collect();
            Value::Tensor(
                ev.graph
                    .add_input(format!("arg{}", name.join("_")), t.clone()),
            )
        }
        CallArg::Integer(i) => Value::Integer(*i),
        CallArg::Scalar(s) => Value::Scalar(*s),
        CallArg::Logical(b) => Value::Logical(*b),
        CallArg::Str(s) => Value::Str(s.clone()),
        CallArg::Array(items) | CallArg::Tuple(items) => {
            let mut vs = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                path.push(i);
                vs.push(to_value(ev, item, path));
                path.pop();
            }
            if matches!(a, CallArg::Array(_)) {
                Value::Array(vs)
            } else {
                Value::Tuple(vs)
            }
        }
    }
}

fn from_value(ev: &Evaluator<'_>, v: &Value) -> Option<CallResult> {
    Some(match v {
        Value::Tensor(id) => CallResult::Tensor(ev.graph.ty(*id).clone()),
        Value::Array(items) => CallResult::Array(
            items
                .iter()
                .map(|i| from_value(ev, i))
                .collect::<Option<_>>()?,
        ),
        Value::Tuple(items) => CallResult::Tuple(
            items
                .iter()
                .map(|i| from_value(ev, i))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

/// A tensor type with open extents (`None`), as the builder states shapes.
pub fn tensor_type(dtype: DType, dims: &[Option<usize>]) -> TensorType {
    TensorType::with_dims(
        dtype,
        dims.iter()
            .map(|d| d.map_or(Dim::Unknown, Dim::Known))
            .collect(),
    )
}
