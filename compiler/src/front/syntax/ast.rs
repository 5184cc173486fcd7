//! The NNEF abstract syntax tree, as produced by the lalrpop grammar (`nnef.lalrpop`).
//!
//! Every node carries a [`Span`]. The tree records syntax only: no name is resolved, no
//! expression evaluated, no type checked. Flat and compositional syntax share these
//! types; the grammar accepts compositional forms everywhere and the resolver rejects
//! them when the document does not enable the matching extension.

use crate::diag::Span;

/// A whole `graph.nnef` (or `stdlib.nnef`, which has fragments and no graph).
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// `version 1.0;` — `None` only for the stdlib, which the parser reads in library mode.
    pub version: Option<Version>,
    pub extensions: Vec<Extension>,
    pub fragments: Vec<FragmentDef>,
    pub graph: Option<GraphDef>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub span: Span,
}

/// `extension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;`
#[derive(Clone, Debug, PartialEq)]
pub struct Extension {
    pub names: Vec<Ident>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// `fragment name<?>(params) -> (results) { body }` or a declaration without body
/// (`fragment name(...) -> (...);`, used for primitives in the stdlib).
#[derive(Clone, Debug, PartialEq)]
pub struct FragmentDef {
    pub name: Ident,
    /// `<?>` or `<? = scalar>`: `Some(None)` for `<?>`, `Some(Some(t))` for a default.
    pub generic: Option<Option<TypeSpec>>,
    pub params: Vec<Param>,
    pub results: Vec<ResultDecl>,
    /// `None` for a declaration without body (a primitive).
    pub body: Option<Vec<Assignment>>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: Ident,
    pub ty: TypeSpec,
    pub default: Option<Expr>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ResultDecl {
    pub name: Ident,
    pub ty: TypeSpec,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrimType {
    Integer,
    Scalar,
    Logical,
    String,
}

/// A type as written in a fragment signature.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeSpec {
    Prim(PrimType, Span),
    /// `?`
    Generic(Span),
    /// `tensor<T>`; `tensor<>` has `None` (any data type, used by `cast`).
    Tensor(Option<Box<TypeSpec>>, Span),
    /// `T[]`
    Array(Box<TypeSpec>, Span),
    /// `(T, U, ...)`
    Tuple(Vec<TypeSpec>, Span),
}

impl TypeSpec {
    pub fn span(&self) -> Span {
        match self {
            TypeSpec::Prim(_, s)
            | TypeSpec::Generic(s)
            | TypeSpec::Tensor(_, s)
            | TypeSpec::Array(_, s)
            | TypeSpec::Tuple(_, s) => *s,
        }
    }
}

/// `graph name(inputs) -> (outputs) { body }`
#[derive(Clone, Debug, PartialEq)]
pub struct GraphDef {
    pub name: Ident,
    pub params: Vec<Ident>,
    pub results: Vec<Ident>,
    pub body: Vec<Assignment>,
    pub span: Span,
}

/// `lhs = rhs;` — the lhs is an identifier, or an array / tuple of lhs patterns
/// (`[a, b] = split(...)`, `(m, v) = moments(...)`). The grammar stores it as an
/// [`Expr`] restricted to `Ident`, `Array` and `Tuple`.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    pub lhs: Expr,
    pub rhs: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    /// An integer literal without `.` or exponent, e.g. `3`.
    Integer(i64),
    /// A real literal, e.g. `1.0`, `1e-5`. Stored as written, parsed to f64.
    Scalar(f64),
    Logical(bool),
    String(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `+x`
    Plus,
    /// `!x`
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    /// `^`
    Pow,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
    Ne,
    /// `&&`
    And,
    /// `||`
    Or,
    /// `in` (membership test in a comprehension filter or condition)
    In,
}

/// The built-in functions written with call syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    LengthOf,
    RangeOf,
    /// Deprecated since 1.0.1; the resolver reports it.
    ShapeOf,
    /// `integer(x)`, `scalar(x)`, `logical(x)`, `string(x)` casts.
    Cast(PrimType),
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Literal(Literal),
    Ident(String),
    /// `[a, b, c]`
    Array(Vec<Expr>),
    /// `(a, b)`; a parenthesized single expression is *not* a tuple.
    Tuple(Vec<Expr>),
    /// `name<T>(args)` — an operation / fragment invocation.
    Invocation {
        name: Ident,
        generic: Option<TypeSpec>,
        args: Vec<Arg>,
    },
    /// `length_of(x)`, `scalar(x)`, ...
    Builtin {
        func: Builtin,
        arg: Box<Expr>,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `a if cond else b` — evaluated lazily.
    IfElse {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// `x[i]` or `x[a:b]` (either end may be open).
    Subscript {
        base: Box<Expr>,
        index: Box<Index>,
    },
    /// `[for i in xs, (a, b) in ys if cond yield body]`; iterators advance in lockstep.
    Comprehension {
        iters: Vec<(IterPattern, Expr)>,
        filter: Option<Box<Expr>>,
        body: Box<Expr>,
    },
}

/// Dropping a tree moves each node's children onto a heap stack instead of recursing:
/// a document may nest expressions [`super::MAX_NESTING`] deep, and the tree may be
/// dropped on any thread (the parser's callers, the parser itself after an error).
impl Drop for Expr {
    fn drop(&mut self) {
        let mut pending: Vec<Expr> = Vec::new();
        take_children(&mut self.kind, &mut pending);
        while let Some(mut e) = pending.pop() {
            take_children(&mut e.kind, &mut pending);
            // `e` drops here without children.
        }
    }
}

/// Moves the sub-expressions of `kind` into `out`, leaving leaves behind.
fn take_children(kind: &mut ExprKind, out: &mut Vec<Expr>) {
    fn take(b: &mut Expr, out: &mut Vec<Expr>) {
        let leaf = Expr {
            kind: ExprKind::Literal(Literal::Logical(false)),
            span: Span::default(),
        };
        out.push(std::mem::replace(b, leaf));
    }
    match kind {
        ExprKind::Literal(_) | ExprKind::Ident(_) => {}
        ExprKind::Array(items) | ExprKind::Tuple(items) => out.append(items),
        ExprKind::Invocation { args, .. } => out.extend(args.drain(..).map(|a| a.value)),
        ExprKind::Builtin { arg: e, .. } | ExprKind::Unary { operand: e, .. } => take(e, out),
        ExprKind::Binary { lhs, rhs, .. } => {
            take(lhs, out);
            take(rhs, out);
        }
        ExprKind::IfElse {
            cond,
            then,
            otherwise,
        } => {
            take(cond, out);
            take(then, out);
            take(otherwise, out);
        }
        ExprKind::Subscript { base, index } => {
            take(base, out);
            match std::mem::replace(&mut **index, Index::Range(None, None)) {
                Index::Single(e) => out.push(e),
                Index::Range(a, b) => out.extend(a.into_iter().chain(b)),
            }
        }
        ExprKind::Comprehension {
            iters,
            filter,
            body,
        } => {
            out.extend(iters.drain(..).map(|(_, e)| e));
            if let Some(f) = filter {
                take(f, out);
            }
            take(body, out);
        }
    }
}

/// What a comprehension iterator binds: one name, or a tuple pattern `(a, b)` that
/// destructures each item of the iterable (spec §1.8; tuples may nest).
#[derive(Clone, Debug, PartialEq)]
pub enum IterPattern {
    Name(Ident),
    Tuple(Vec<IterPattern>, Span),
}

impl IterPattern {
    pub fn span(&self) -> Span {
        match self {
            IterPattern::Name(i) => i.span,
            IterPattern::Tuple(_, s) => *s,
        }
    }

    /// The pattern as written, for messages: `i`, `(a, b)`.
    pub fn text(&self) -> String {
        match self {
            IterPattern::Name(i) => i.name.clone(),
            IterPattern::Tuple(items, _) => {
                let parts: Vec<String> = items.iter().map(IterPattern::text).collect();
                format!("({})", parts.join(", "))
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Index {
    Single(Expr),
    Range(Option<Expr>, Option<Expr>),
}

/// An invocation argument, positional (`name == None`) or named.
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
    pub span: Span,
}
