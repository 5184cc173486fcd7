//! Parser and printer tests: valid documents against their canonical printed form,
//! expressions against a fully parenthesized dump (precedence), invalid documents
//! against their rendered diagnostic, the model corpus, and properties (no input makes
//! the parser panic; printing then parsing gives back the same tree up to spans).
//!
//! Bless expectations with `UPDATE_EXPECT=1`.

use super::ast::*;
use super::{parse_document, parse_library, print};
use crate::diag::{FileId, SourceMap, Span};
use expect_test::{Expect, expect};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------
// Span erasure, so trees can be compared after a print/parse round trip.

fn strip_doc(doc: &mut Document) {
    if let Some(v) = &mut doc.version {
        v.span = Span::default();
    }
    for e in &mut doc.extensions {
        e.span = Span::default();
        e.names.iter_mut().for_each(strip_ident);
    }
    for f in &mut doc.fragments {
        f.span = Span::default();
        strip_ident(&mut f.name);
        if let Some(Some(t)) = &mut f.generic {
            strip_type(t);
        }
        for p in &mut f.params {
            p.span = Span::default();
            strip_ident(&mut p.name);
            strip_type(&mut p.ty);
            if let Some(d) = &mut p.default {
                strip_expr(d);
            }
        }
        for r in &mut f.results {
            r.span = Span::default();
            strip_ident(&mut r.name);
            strip_type(&mut r.ty);
        }
        if let Some(body) = &mut f.body {
            body.iter_mut().for_each(strip_assignment);
        }
    }
    if let Some(g) = &mut doc.graph {
        g.span = Span::default();
        strip_ident(&mut g.name);
        g.params.iter_mut().for_each(strip_ident);
        g.results.iter_mut().for_each(strip_ident);
        g.body.iter_mut().for_each(strip_assignment);
    }
}

/// The message of the first diagnostic (the one expression tests look at).
fn first_message(d: &crate::diag::Diagnostics) -> &str {
    d.0.first().map_or("", |d| d.message.as_str())
}

fn strip_ident(i: &mut Ident) {
    i.span = Span::default();
}

fn strip_pattern(p: &mut IterPattern) {
    match p {
        IterPattern::Name(i) => strip_ident(i),
        IterPattern::Tuple(items, s) => {
            *s = Span::default();
            items.iter_mut().for_each(strip_pattern);
        }
    }
}

fn strip_type(t: &mut TypeSpec) {
    match t {
        TypeSpec::Prim(_, s) | TypeSpec::Generic(s) => *s = Span::default(),
        TypeSpec::Tensor(inner, s) => {
            *s = Span::default();
            if let Some(i) = inner {
                strip_type(i);
            }
        }
        TypeSpec::Array(inner, s) => {
            *s = Span::default();
            strip_type(inner);
        }
        TypeSpec::Tuple(items, s) => {
            *s = Span::default();
            items.iter_mut().for_each(strip_type);
        }
    }
}

fn strip_assignment(a: &mut Assignment) {
    a.span = Span::default();
    strip_expr(&mut a.lhs);
    strip_expr(&mut a.rhs);
}

fn strip_expr(e: &mut Expr) {
    e.span = Span::default();
    match &mut e.kind {
        ExprKind::Literal(_) | ExprKind::Ident(_) => {}
        ExprKind::Array(items) | ExprKind::Tuple(items) => items.iter_mut().for_each(strip_expr),
        ExprKind::Invocation {
            name,
            generic,
            args,
        } => {
            strip_ident(name);
            if let Some(t) = generic {
                strip_type(t);
            }
            for a in args {
                a.span = Span::default();
                if let Some(n) = &mut a.name {
                    strip_ident(n);
                }
                strip_expr(&mut a.value);
            }
        }
        ExprKind::Builtin { arg, .. } => strip_expr(arg),
        ExprKind::Unary { operand, .. } => strip_expr(operand),
        ExprKind::Binary { lhs, rhs, .. } => {
            strip_expr(lhs);
            strip_expr(rhs);
        }
        ExprKind::IfElse {
            cond,
            then,
            otherwise,
        } => {
            strip_expr(cond);
            strip_expr(then);
            strip_expr(otherwise);
        }
        ExprKind::Subscript { base, index } => {
            strip_expr(base);
            match index.as_mut() {
                Index::Single(i) => strip_expr(i),
                Index::Range(a, b) => {
                    if let Some(a) = a {
                        strip_expr(a);
                    }
                    if let Some(b) = b {
                        strip_expr(b);
                    }
                }
            }
        }
        ExprKind::Comprehension {
            iters,
            filter,
            body,
        } => {
            for (n, e) in iters {
                strip_pattern(n);
                strip_expr(e);
            }
            if let Some(f) = filter {
                strip_expr(f);
            }
            strip_expr(body);
        }
    }
}

// ---------------------------------------------------------------------------------------
// A fully parenthesized dump that shows the tree shape the printer hides.

fn sexpr(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Literal(l) => print::literal(l),
        ExprKind::Ident(n) => n.clone(),
        ExprKind::Array(items) => format!(
            "[{}]",
            items.iter().map(sexpr).collect::<Vec<_>>().join(" ")
        ),
        ExprKind::Tuple(items) => {
            format!(
                "(tuple {})",
                items.iter().map(sexpr).collect::<Vec<_>>().join(" ")
            )
        }
        ExprKind::Invocation {
            name,
            generic,
            args,
        } => {
            let mut s = format!("(call {}", name.name);
            if let Some(t) = generic {
                s.push_str(&format!("<{}>", print::type_spec(t)));
            }
            for a in args {
                match &a.name {
                    Some(n) => s.push_str(&format!(" {}={}", n.name, sexpr(&a.value))),
                    None => s.push_str(&format!(" {}", sexpr(&a.value))),
                }
            }
            s + ")"
        }
        ExprKind::Builtin { func, arg } => {
            format!("({} {})", print::builtin_name(*func), sexpr(arg))
        }
        ExprKind::Unary { op, operand } => format!("({} {})", print::unary_op(*op), sexpr(operand)),
        ExprKind::Binary { op, lhs, rhs } => {
            format!("({} {} {})", print::binary_op(*op), sexpr(lhs), sexpr(rhs))
        }
        ExprKind::IfElse {
            cond,
            then,
            otherwise,
        } => {
            format!("(if {} {} {})", sexpr(cond), sexpr(then), sexpr(otherwise))
        }
        ExprKind::Subscript { base, index } => match index.as_ref() {
            Index::Single(i) => format!("(at {} {})", sexpr(base), sexpr(i)),
            Index::Range(a, b) => format!(
                "(slice {} {} {})",
                sexpr(base),
                a.as_ref().map(sexpr).unwrap_or_else(|| "_".into()),
                b.as_ref().map(sexpr).unwrap_or_else(|| "_".into())
            ),
        },
        ExprKind::Comprehension {
            iters,
            filter,
            body,
        } => {
            let its: Vec<String> = iters
                .iter()
                .map(|(n, e)| format!("{} {}", n.text(), sexpr(e)))
                .collect();
            let f = filter
                .as_ref()
                .map(|f| format!(" (filter {})", sexpr(f)))
                .unwrap_or_default();
            format!("(for [{}]{} {})", its.join(", "), f, sexpr(body))
        }
    }
}

// ---------------------------------------------------------------------------------------
// Drivers

/// Parses, checks that printing and re-parsing gives the same tree, and returns either
/// the printed document or the rendered diagnostic.
fn run(text: &str, library: bool) -> String {
    let mut sources = SourceMap::new();
    let file = sources.add("test.nnef", text);
    let parse = if library {
        parse_library
    } else {
        parse_document
    };
    match parse(file, text) {
        Ok(mut doc) => {
            let printed = print::document(&doc);
            let mut again = match parse(file, &printed) {
                Ok(d) => d,
                Err(d) => panic!("printed form does not parse:\n{printed}\n{d}"),
            };
            strip_doc(&mut doc);
            strip_doc(&mut again);
            assert_eq!(doc, again, "round trip changed the tree:\n{printed}");
            printed
        }
        Err(d) => d.render(&sources),
    }
}

fn check(text: &str, expect: Expect) {
    expect.assert_eq(&run(text, false));
}

fn check_lib(text: &str, expect: Expect) {
    expect.assert_eq(&run(text, true));
}

/// Parses `e` as the right-hand side of an assignment; returns the s-expression dump
/// and the canonical print, one per line.
fn check_exprs(exprs: &[&str], expect: Expect) {
    let mut out = String::new();
    for e in exprs {
        let text = format!("version 1.0;\ngraph g() -> () {{\n    x = {e};\n}}\n");
        let mut sources = SourceMap::new();
        let file = sources.add("expr.nnef", text.as_str());
        match parse_document(file, &text) {
            Ok(doc) => {
                // Also exercise the round trip on every expression.
                run(&text, false);
                let rhs = doc
                    .graph
                    .as_ref()
                    .and_then(|g| g.body.first())
                    .map(|a| &a.rhs);
                match rhs {
                    Some(rhs) => out.push_str(&format!(
                        "{e}\n    {}\n    {}\n",
                        sexpr(rhs),
                        print::expr(rhs)
                    )),
                    None => out.push_str(&format!("{e}\n    <no assignment>\n")),
                }
            }
            Err(d) => out.push_str(&format!("{e}\n    error: {}\n", first_message(&d))),
        }
    }
    expect.assert_eq(&out);
}

// ---------------------------------------------------------------------------------------
// Valid documents

#[test]
fn flat_graph_with_comments_and_quotes() {
    check(
        r#"# a comment before the version
version 1.0; # trailing comment
graph net( data ) -> ( prob ) # header comment
{
    data  = external<scalar>(shape = [1, 3, 224, 224]);
    w1    = variable<scalar>(shape = [32, 3, 3, 3], label = 'conv1/filter');
    b1    = variable(shape = [1, 32], label = "conv1/bias");   # double quotes
    c1    = conv(data, w1, b1, stride = [2, 2], padding = [(0,0), (1, 1)], border = 'constant');
    pool  = avg_pool(c1, size = [1, 1, 112, 112], border = 'ignore');
    flat  = reshape(pool, shape = [1, -1]);
    prob  = softmax(flat, axes = [1]);
}
"#,
        expect![[r#"
            version 1.0;

            graph net( data ) -> ( prob )
            {
                data = external<scalar>(shape = [1, 3, 224, 224]);
                w1 = variable<scalar>(shape = [32, 3, 3, 3], label = 'conv1/filter');
                b1 = variable(shape = [1, 32], label = 'conv1/bias');
                c1 = conv(data, w1, b1, stride = [2, 2], padding = [(0, 0), (1, 1)], border = 'constant');
                pool = avg_pool(c1, size = [1, 1, 112, 112], border = 'ignore');
                flat = reshape(pool, shape = [1, -1]);
                prob = softmax(flat, axes = [1]);
            }
        "#]],
    );
}

#[test]
fn literal_forms() {
    check_exprs(
        &[
            "0",
            "007",
            "9223372036854775807",
            "1.0",
            "1.",
            "0.5",
            "1e5",
            "1E5",
            "1.5e-3",
            "2.5E+2",
            "9.999999747378752e-06",
            "'single'",
            "\"double\"",
            "\"it's\"",
            "'say \"hi\"'",
            "''",
            "'# not a comment'",
            "true",
            "false",
            "-1",
            "[]",
            "[1, 2.0, 'a', true]",
            "(1, 2)",
            "((1, 2), [3])",
        ],
        expect![[r#"
            0
                0
                0
            007
                7
                7
            9223372036854775807
                9223372036854775807
                9223372036854775807
            1.0
                1.0
                1.0
            1.
                1.0
                1.0
            0.5
                0.5
                0.5
            1e5
                100000.0
                100000.0
            1E5
                100000.0
                100000.0
            1.5e-3
                0.0015
                0.0015
            2.5E+2
                250.0
                250.0
            9.999999747378752e-06
                9.999999747378752e-6
                9.999999747378752e-6
            'single'
                'single'
                'single'
            "double"
                'double'
                'double'
            "it's"
                "it's"
                "it's"
            'say "hi"'
                'say "hi"'
                'say "hi"'
            ''
                ''
                ''
            '# not a comment'
                '# not a comment'
                '# not a comment'
            true
                true
                true
            false
                false
                false
            -1
                (- 1)
                -1
            []
                []
                []
            [1, 2.0, 'a', true]
                [1 2.0 'a' true]
                [1, 2.0, 'a', true]
            (1, 2)
                (tuple 1 2)
                (1, 2)
            ((1, 2), [3])
                (tuple (tuple 1 2) [3])
                ((1, 2), [3])
        "#]],
    );
}

#[test]
fn operator_precedence() {
    check_exprs(
        &[
            "a + b * c",
            "a * b + c",
            "a - b - c",
            "a - (b - c)",
            "a / b / c",
            "a ^ b ^ c",
            "(a ^ b) ^ c",
            "-a ^ 2",
            "-(a ^ 2)",
            "2 ^ -1",
            "-a - 1.0",
            "- -a",
            "!a && b",
            "!(a && b)",
            "a || b && c",
            "(a || b) && c",
            "a && b || c && d",
            "a < b == c > d",
            "a + 1 <= b * 2",
            "i in axes && j >= 0",
            "a + b in xs",
            "x if c else y",
            "x if a || b else y",
            "a + 1 if c else b - 1",
            "x if c else y if d else z",
            "(x if c else y) if d else z",
            "x if (y if c else d) else z",
            "x if c else y + 1",
            "(x if c else y) + 1",
            "+a * b",
            "a * (b + c)",
            "-(a + b)[0]",
            "(-a)[0]",
            "f(x)[0][1:]",
        ],
        expect![[r#"
            a + b * c
                (+ a (* b c))
                a + b * c
            a * b + c
                (+ (* a b) c)
                a * b + c
            a - b - c
                (- (- a b) c)
                a - b - c
            a - (b - c)
                (- a (- b c))
                a - (b - c)
            a / b / c
                (/ (/ a b) c)
                a / b / c
            a ^ b ^ c
                (^ a (^ b c))
                a ^ b ^ c
            (a ^ b) ^ c
                (^ (^ a b) c)
                (a ^ b) ^ c
            -a ^ 2
                (^ (- a) 2)
                -a ^ 2
            -(a ^ 2)
                (- (^ a 2))
                -(a ^ 2)
            2 ^ -1
                (^ 2 (- 1))
                2 ^ -1
            -a - 1.0
                (- (- a) 1.0)
                -a - 1.0
            - -a
                (- (- a))
                --a
            !a && b
                (&& (! a) b)
                !a && b
            !(a && b)
                (! (&& a b))
                !(a && b)
            a || b && c
                (|| a (&& b c))
                a || b && c
            (a || b) && c
                (&& (|| a b) c)
                (a || b) && c
            a && b || c && d
                (|| (&& a b) (&& c d))
                a && b || c && d
            a < b == c > d
                (> (== (< a b) c) d)
                a < b == c > d
            a + 1 <= b * 2
                (<= (+ a 1) (* b 2))
                a + 1 <= b * 2
            i in axes && j >= 0
                (&& (in i axes) (>= j 0))
                i in axes && j >= 0
            a + b in xs
                (in (+ a b) xs)
                a + b in xs
            x if c else y
                (if c x y)
                x if c else y
            x if a || b else y
                (if (|| a b) x y)
                x if a || b else y
            a + 1 if c else b - 1
                (if c (+ a 1) (- b 1))
                a + 1 if c else b - 1
            x if c else y if d else z
                (if c x (if d y z))
                x if c else y if d else z
            (x if c else y) if d else z
                (if d (if c x y) z)
                (x if c else y) if d else z
            x if (y if c else d) else z
                (if (if c y d) x z)
                x if (y if c else d) else z
            x if c else y + 1
                (if c x (+ y 1))
                x if c else y + 1
            (x if c else y) + 1
                (+ (if c x y) 1)
                (x if c else y) + 1
            +a * b
                (* (+ a) b)
                +a * b
            a * (b + c)
                (* a (+ b c))
                a * (b + c)
            -(a + b)[0]
                (- (at (+ a b) 0))
                -(a + b)[0]
            (-a)[0]
                (at (- a) 0)
                (-a)[0]
            f(x)[0][1:]
                (slice (at (call f x) 0) 1 _)
                f(x)[0][1:]
        "#]],
    );
}

#[test]
fn subscripts_comprehensions_builtins_invocations() {
    check_exprs(
        &[
            "x[0]",
            "x[-1]",
            "x[a:b]",
            "x[:b]",
            "x[a:]",
            "x[:]",
            "x[i + 1:length_of(x) - 1]",
            "'text'[1:]",
            "[for i in xs yield i * 2]",
            "[for i in range_of(xs), x in xs if i != axis yield x]",
            "[for i in xs if i in ys yield (i, i)]",
            "[for i in a + b yield [i]]",
            "[for i in xs yield i if i > 0 else 0]",
            "[for (a, b) in pairs yield a + b]",
            "[for ((a, b), c) in nested, i in xs yield (c, i)]",
            "length_of(x)",
            "range_of([1, 2])",
            "shape_of(t)",
            "integer(2.5)",
            "scalar(n) / 2.0",
            "logical('x')",
            "string(3)",
            "cast<integer>(x)",
            "external<scalar>(shape = [1])",
            "f<?>(x)",
            "f< logical >(x, y)",
            "f()",
            "f(g(h(x)), k = [1, 2], s = 'v')",
            "a < b",
            "a<b",
            "a <b> c",
            "x < integer(y)",
            "select(x < 0.0, alpha * (exp(x) - 1.0), x)",
        ],
        expect![[r#"
            x[0]
                (at x 0)
                x[0]
            x[-1]
                (at x (- 1))
                x[-1]
            x[a:b]
                (slice x a b)
                x[a:b]
            x[:b]
                (slice x _ b)
                x[:b]
            x[a:]
                (slice x a _)
                x[a:]
            x[:]
                (slice x _ _)
                x[:]
            x[i + 1:length_of(x) - 1]
                (slice x (+ i 1) (- (length_of x) 1))
                x[i + 1:length_of(x) - 1]
            'text'[1:]
                (slice 'text' 1 _)
                'text'[1:]
            [for i in xs yield i * 2]
                (for [i xs] (* i 2))
                [for i in xs yield i * 2]
            [for i in range_of(xs), x in xs if i != axis yield x]
                (for [i (range_of xs), x xs] (filter (!= i axis)) x)
                [for i in range_of(xs), x in xs if i != axis yield x]
            [for i in xs if i in ys yield (i, i)]
                (for [i xs] (filter (in i ys)) (tuple i i))
                [for i in xs if i in ys yield (i, i)]
            [for i in a + b yield [i]]
                (for [i (+ a b)] [i])
                [for i in a + b yield [i]]
            [for i in xs yield i if i > 0 else 0]
                (for [i xs] (if (> i 0) i 0))
                [for i in xs yield i if i > 0 else 0]
            [for (a, b) in pairs yield a + b]
                (for [(a, b) pairs] (+ a b))
                [for (a, b) in pairs yield a + b]
            [for ((a, b), c) in nested, i in xs yield (c, i)]
                (for [((a, b), c) nested, i xs] (tuple c i))
                [for ((a, b), c) in nested, i in xs yield (c, i)]
            length_of(x)
                (length_of x)
                length_of(x)
            range_of([1, 2])
                (range_of [1 2])
                range_of([1, 2])
            shape_of(t)
                (shape_of t)
                shape_of(t)
            integer(2.5)
                (integer 2.5)
                integer(2.5)
            scalar(n) / 2.0
                (/ (scalar n) 2.0)
                scalar(n) / 2.0
            logical('x')
                (logical 'x')
                logical('x')
            string(3)
                (string 3)
                string(3)
            cast<integer>(x)
                (call cast<integer> x)
                cast<integer>(x)
            external<scalar>(shape = [1])
                (call external<scalar> shape=[1])
                external<scalar>(shape = [1])
            f<?>(x)
                (call f<?> x)
                f<?>(x)
            f< logical >(x, y)
                (call f<logical> x y)
                f<logical>(x, y)
            f()
                (call f)
                f()
            f(g(h(x)), k = [1, 2], s = 'v')
                (call f (call g (call h x)) k=[1 2] s='v')
                f(g(h(x)), k = [1, 2], s = 'v')
            a < b
                (< a b)
                a < b
            a<b
                (< a b)
                a < b
            a <b> c
                (> (< a b) c)
                a < b > c
            x < integer(y)
                (< x (integer y))
                x < integer(y)
            select(x < 0.0, alpha * (exp(x) - 1.0), x)
                (call select (< x 0.0) (* alpha (- (call exp x) 1.0)) x)
                select(x < 0.0, alpha * (exp(x) - 1.0), x)
        "#]],
    );
}

#[test]
fn extensions_fragments_and_lvalues() {
    check(
        r#"version 1.0;
extension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;
extension tract_registry tract_core;

fragment my_act( x: tensor<scalar>, k: scalar = 2.0 ) -> ( y: tensor<scalar> )
{
    y = x * sigmoid(k * x);
}

fragment pick<?>( items: tensor<?>[], i: integer = -1 ) -> ( y: tensor<?> )
{
    y = items[i];
}

fragment make<? = scalar>( shape: integer[], value: ?[] = [] ) -> ( output: tensor<?> );
fragment my_cast( x: tensor<> ) -> ( y: tensor<integer> );
fragment pads( p: (integer, integer)[] = [(0, 0), (1, -1)], m: integer[][] = [[1], []], s: string = "edge", b: logical = true ) -> ( r: (integer, scalar) );

graph g( input ) -> ( a, b, c )
{
    input = external(shape = [4, 2]);
    [a, b] = split(input, axis = 0, ratios = [1, 1]);
    (c, idx) = max_pool_with_index(input, size = [1, 2]);
    m, v = moments(input, axes = [1]);
    ([p, q], r) = f(input);
    [] = g(input);
}
"#,
        expect![[r#"
            version 1.0;
            extension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;
            extension tract_registry, tract_core;

            fragment my_act( x: tensor<scalar>, k: scalar = 2.0 ) -> ( y: tensor<scalar> )
            {
                y = x * sigmoid(k * x);
            }

            fragment pick<?>( items: tensor<?>[], i: integer = -1 ) -> ( y: tensor<?> )
            {
                y = items[i];
            }

            fragment make<? = scalar>( shape: integer[], value: ?[] = [] ) -> ( output: tensor<?> );

            fragment my_cast( x: tensor<> ) -> ( y: tensor<integer> );

            fragment pads( p: (integer, integer)[] = [(0, 0), (1, -1)], m: integer[][] = [[1], []], s: string = 'edge', b: logical = true ) -> ( r: (integer, scalar) );

            graph g( input ) -> ( a, b, c )
            {
                input = external(shape = [4, 2]);
                [a, b] = split(input, axis = 0, ratios = [1, 1]);
                (c, idx) = max_pool_with_index(input, size = [1, 2]);
                (m, v) = moments(input, axes = [1]);
                ([p, q], r) = f(input);
                [] = g(input);
            }
        "#]],
    );
}

#[test]
fn empty_graph_lists_and_compact_spacing() {
    check(
        "version 1.0;graph g()->(){x=f<integer>(1);y=x[1:]if!c else-x;}",
        expect![[r#"
            version 1.0;

            graph g() -> ()
            {
                x = f<integer>(1);
                y = x[1:] if !c else -x;
            }
        "#]],
    );
}

#[test]
fn byte_order_mark_and_crlf() {
    check(
        "\u{feff}version 1.0;\r\ngraph g( x ) -> ( y )\r\n{\r\n    y = relu(x); # c\r\n}\r\n",
        expect![[r#"
            version 1.0;

            graph g( x ) -> ( y )
            {
                y = relu(x);
            }
        "#]],
    );
}

#[test]
fn library_mode() {
    check_lib(
        r#"
# primitives are declarations, compounds have bodies
fragment add( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> );
fragment constant<? = scalar>( shape: integer[], value: ?[] ) -> ( output: tensor<?> );

fragment softmax( x: tensor<scalar>, axes: integer[] = [1] ) -> ( y: tensor<scalar> )
{
    m = max_reduce(x, axes = axes);
    e = exp(x - m);
    y = e / sum_reduce(e, axes = axes);
}

fragment nearest_upsample( input: tensor<scalar>, factor: integer[] ) -> ( output: tensor<scalar> )
{
    dims = 2 + length_of(factor);
    output = debox(input, size = [1, 1] + factor, stride = [1, 1] + factor, padding = [(0, 0)] * dims);
}

fragment add_n( x: tensor<scalar>[] ) -> ( y: tensor<scalar> )
{
    y = x[0] + add_n(x[1:]) if length_of(x) > 1 else x[0];
}
"#,
        expect![[r#"
            fragment add( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> );

            fragment constant<? = scalar>( shape: integer[], value: ?[] ) -> ( output: tensor<?> );

            fragment softmax( x: tensor<scalar>, axes: integer[] = [1] ) -> ( y: tensor<scalar> )
            {
                m = max_reduce(x, axes = axes);
                e = exp(x - m);
                y = e / sum_reduce(e, axes = axes);
            }

            fragment nearest_upsample( input: tensor<scalar>, factor: integer[] ) -> ( output: tensor<scalar> )
            {
                dims = 2 + length_of(factor);
                output = debox(input, size = [1, 1] + factor, stride = [1, 1] + factor, padding = [(0, 0)] * dims);
            }

            fragment add_n( x: tensor<scalar>[] ) -> ( y: tensor<scalar> )
            {
                y = x[0] + add_n(x[1:]) if length_of(x) > 1 else x[0];
            }
        "#]],
    );
    check_lib("# nothing but a comment\n", expect![[""]]);
}

#[test]
fn spans_point_at_source() {
    let text = "version 1.0;\ngraph g(a) -> (b)\n{\n    b = relu(a + 1.0);\n}\n";
    let doc = parse_document(FileId(3), text).expect("valid");
    let g = doc.graph.expect("graph");
    let slice = |s: Span| &text[s.start as usize..s.end as usize];
    assert_eq!(s_file(g.span), FileId(3));
    assert_eq!(slice(doc.version.expect("version").span), "version 1.0;");
    assert_eq!(slice(g.name.span), "g");
    let a = &g.body[0];
    assert_eq!(slice(a.span), "b = relu(a + 1.0);");
    assert_eq!(slice(a.lhs.span), "b");
    assert_eq!(slice(a.rhs.span), "relu(a + 1.0)");
    let ExprKind::Invocation { name, args, .. } = &a.rhs.kind else {
        panic!("not an invocation")
    };
    assert_eq!(slice(name.span), "relu");
    assert_eq!(slice(args[0].span), "a + 1.0");
    let ExprKind::Binary { rhs, .. } = &args[0].value.kind else {
        panic!("not binary")
    };
    assert_eq!(slice(rhs.span), "1.0");
}

fn s_file(s: Span) -> FileId {
    s.file
}

// ---------------------------------------------------------------------------------------
// Invalid documents: each case is rendered with file, line:col and caret.

fn check_errors(cases: &[(&str, &str)], library: bool, expect: Expect) {
    let mut out = String::new();
    for (name, text) in cases {
        out.push_str(&format!("== {name}\n"));
        let rendered = run(text, library);
        assert!(
            rendered.starts_with("error"),
            "{name}: expected an error, got\n{rendered}"
        );
        out.push_str(&rendered);
    }
    expect.assert_eq(&out);
}

#[test]
fn document_errors() {
    let g = |body: &str| format!("version 1.0;\ngraph g(x) -> (y)\n{{\n    {body}\n}}\n");
    let cases: Vec<(&str, String)> = vec![
        ("empty file", String::new()),
        ("missing version", "graph g(x) -> (y) { y = x; }\n".into()),
        ("integer version", "version 1;\n".into()),
        ("exponent version", "version 1e0;\n".into()),
        ("version with patch level", "version 1.0.5;\n".into()),
        ("exponent without digits", g("y = f(x, k = 1e);")),
        ("signed exponent without digits", g("y = f(x, k = 2.5e-);")),
        ("version without semicolon", "version 1.0\ngraph g() -> () { }\n".into()),
        ("missing graph", "version 1.0;\n".into()),
        ("text after graph", "version 1.0;\ngraph g() -> () { x = f(); }\ny = 1;\n".into()),
        ("two graphs", "version 1.0;\ngraph g() -> () { x = f(); }\ngraph h() -> () { x = f(); }\n".into()),
        ("extension without names", "version 1.0;\nextension;\n".into()),
        ("graph missing arrow", "version 1.0;\ngraph g(x) (y) { y = x; }\n".into()),
        ("empty graph body", "version 1.0;\ngraph g(x) -> (y)\n{\n}\n".into()),
        ("unterminated single-quoted string", g("y = f(x, s = 'abc);")),
        ("unterminated double-quoted string", g("y = f(x, s = \"abc);")),
        ("invalid character", g("y = x $ 2;")),
        ("non-ASCII character", g("y = µ(x);")),
        ("integer overflow", g("y = f(x, n = 99999999999999999999);")),
        ("real overflow", g("y = f(x, n = 1e999);")),
        ("missing semicolon", g("y = f(x)\n    z = g(y);")),
        ("trailing comma in arguments", g("y = f(x,);")),
        ("expression on the left", g("y + 1 = f(x);")),
        ("one-element tuple on the left", g("(y) = f(x);")),
        ("unbalanced parentheses", g("y = f((x);")),
        ("end of file inside an expression", "version 1.0;\ngraph g(x) -> (y)\n{\n    y = f(x,".into()),
        ("double colon range", g("y = x[1:2:3];")),
        ("comprehension without yield", g("y = [for i in x i];")),
        ("if-else as a comprehension iterable", g("y = [for i in a if c else b yield i];")),
        ("if without else", g("y = x if c;")),
        ("keyword as an identifier", g("graph = f(x);")),
        ("keyword in an expression", g("y = f(x, for);")),
        ("array type as a generic argument", g("y = cast<integer[]>(x);")),
        ("empty tuple", g("y = ();")),
        ("type keyword without call", g("y = scalar;")),
        ("statement outside a body", "version 1.0;\ny = f(x);\n".into()),
        ("fragment with invalid generic", "version 1.0;\nfragment f<integer>(x: tensor<?>) -> (y: tensor<?>);\ngraph g() -> () { x = f(); }\n".into()),
        ("non-literal default", "version 1.0;\nfragment f(x: tensor<scalar>, k: scalar = a) -> (y: tensor<scalar>);\ngraph g() -> () { x = f(); }\n".into()),
        ("negative default that is not a number", "version 1.0;\nfragment f(k: scalar = -a) -> (y: tensor<scalar>);\ngraph g() -> () { x = f(); }\n".into()),
        ("nested tensor type", "version 1.0;\nfragment f(x: tensor<tensor<scalar>>) -> (y: tensor<scalar>);\ngraph g() -> () { x = f(); }\n".into()),
        ("missing parameter type", "version 1.0;\nfragment f(x) -> (y: tensor<scalar>);\ngraph g() -> () { x = f(); }\n".into()),
        ("fragment without terminator", "version 1.0;\nfragment f(x: integer) -> (y: integer)\ngraph g() -> () { x = f(); }\n".into()),
        // Recovery: each broken statement is skipped to its `;`, and the errors of
        // several statements (and of several bodies) are reported together.
        ("several broken statements", g("y = f(x,);\n    z = (;\n    w = g(x);\n    v = f(x) g;\n    u = x $ 2;")),
        ("errors in a fragment and in the graph", "version 1.0;\nfragment f(x: tensor<scalar>) -> (y: tensor<scalar>) { y = x +; }\ngraph g(x) -> (y) { y = [1, ; }\n".into()),
        // Recovery at the top level: a broken item is skipped to the next `extension`,
        // `fragment` or `graph`, and each broken item gets exactly one error.
        ("two broken fragment declarations", "version 1.0;\nfragment f(x) -> (y: tensor<scalar>);\nfragment h(x: tensor<scalar>) -> (y tensor<scalar>);\ngraph g(x) -> (y) { y = f(x); }\n".into()),
        ("broken fragment header, then a broken graph body", "version 1.0;\nfragment f(x: tensor<scalar>, k: scalar = a) -> (y: tensor<scalar>)\n{\n    y = x;\n    z = x;\n}\ngraph g(x) -> (y) { y = f(x,); z = (; }\n".into()),
        ("broken fragment and broken graph header", "version 1.0;\nfragment f(x: tensor<tensor<scalar>>) -> (y: tensor<scalar>);\ngraph g(x) (y) { y = f(x); }\n".into()),
        ("fragment body never closed", "version 1.0;\nfragment f(x: tensor<scalar>) -> (y: tensor<scalar>)\n{\n    y = x;\ngraph g(x) -> (y) { y = f(x,); }\n".into()),
        ("version without semicolon, then a broken fragment", "version 1.0\nfragment f(x) -> (y: tensor<scalar>);\ngraph g(x) -> (y) { y = f(x); }\n".into()),
        ("broken extension, then a broken graph body", "version 1.0;\nextension KHR_enable_fragment_definitions, ;\ngraph g(x) -> (y) { y = f(x,); }\n".into()),
        ("invalid version number, then a broken graph body", "version 1;\ngraph g(x) -> (y) { y = f(x,); }\n".into()),
        ("invalid generic declaration, then a broken fragment", "version 1.0;\nfragment f<integer>(x: tensor<?>) -> (y: tensor<?>);\nfragment h(x) -> (y: tensor<scalar>);\ngraph g(x) -> (y) { y = f(x); }\n".into()),
    ];
    let cases: Vec<(&str, &str)> = cases.iter().map(|(n, t)| (*n, t.as_str())).collect();
    check_errors(
        &cases,
        false,
        expect![[r#"
            == empty file
            error: unexpected end of file; expected `version`
              ┌─ test.nnef:1:1
              │
            1 │ 
              │ ^

            == missing version
            error: unexpected keyword `graph`; expected `version`
              ┌─ test.nnef:1:1
              │
            1 │ graph g(x) -> (y) { y = x; }
              │ ^^^^^

            == integer version
            error: invalid version number
              ┌─ test.nnef:1:9
              │
            1 │ version 1;
              │         ^ expected `<major>.<minor>`, e.g. `1.0`

            == exponent version
            error: invalid version number `1e0`
              ┌─ test.nnef:1:9
              │
            1 │ version 1e0;
              │         ^^^ expected `<major>.<minor>`, e.g. `1.0`

            == version with patch level
            error: malformed number `1.0.5`
              ┌─ test.nnef:1:9
              │
            1 │ version 1.0.5;
              │         ^^^^^ a number has at most one `.`

            == exponent without digits
            error: malformed real literal `1e`
              ┌─ test.nnef:4:18
              │
            4 │     y = f(x, k = 1e);
              │                  ^^ expected digits after the exponent

            == signed exponent without digits
            error: malformed real literal `2.5e-`
              ┌─ test.nnef:4:18
              │
            4 │     y = f(x, k = 2.5e-);
              │                  ^^^^^ expected digits after the exponent

            == version without semicolon
            error: unexpected keyword `graph`; expected `;`
              ┌─ test.nnef:2:1
              │
            2 │ graph g() -> () { }
              │ ^^^^^
              │
              = is a `;` missing at the end of the previous line?

            error: unexpected `}`; expected one of: identifier, `(`, `[`
              ┌─ test.nnef:2:19
              │
            2 │ graph g() -> () { }
              │                   ^

            == missing graph
            error: unexpected end of file; expected one of: `extension`, `fragment`, `graph`
              ┌─ test.nnef:1:13
              │
            1 │ version 1.0;
              │             ^

            == text after graph
            error: unexpected identifier `y`; expected end of file
              ┌─ test.nnef:3:1
              │
            3 │ y = 1;
              │ ^

            == two graphs
            error: unexpected keyword `graph`; expected end of file
              ┌─ test.nnef:3:1
              │
            3 │ graph h() -> () { x = f(); }
              │ ^^^^^

            == extension without names
            error: unexpected `;`; expected identifier
              ┌─ test.nnef:2:10
              │
            2 │ extension;
              │          ^

            == graph missing arrow
            error: unexpected `(`; expected `->`
              ┌─ test.nnef:2:12
              │
            2 │ graph g(x) (y) { y = x; }
              │            ^

            == empty graph body
            error: unexpected `}`; expected one of: identifier, `(`, `[`
              ┌─ test.nnef:4:1
              │
            4 │ }
              │ ^

            == unterminated single-quoted string
            error: unterminated string literal
              ┌─ test.nnef:4:18
              │
            4 │     y = f(x, s = 'abc);
              │                  ^ this string has no closing '

            == unterminated double-quoted string
            error: unterminated string literal
              ┌─ test.nnef:4:18
              │
            4 │     y = f(x, s = "abc);
              │                  ^ this string has no closing "

            == invalid character
            error: invalid character `$`
              ┌─ test.nnef:4:11
              │
            4 │     y = x $ 2;
              │           ^ not valid in NNEF

            == non-ASCII character
            error: invalid character 'µ' (U+00B5)
              ┌─ test.nnef:4:9
              │
            4 │     y = µ(x);
              │         ^ not valid in NNEF

            == integer overflow
            error: integer literal `99999999999999999999` is too large
              ┌─ test.nnef:4:18
              │
            4 │     y = f(x, n = 99999999999999999999);
              │                  ^^^^^^^^^^^^^^^^^^^^ does not fit in a 64-bit signed integer

            == real overflow
            error: real literal `1e999` is out of range
              ┌─ test.nnef:4:18
              │
            4 │     y = f(x, n = 1e999);
              │                  ^^^^^ does not fit in a 64-bit float

            == missing semicolon
            error: unexpected identifier `z`; expected one of: operator, `if`, `;`
              ┌─ test.nnef:5:5
              │
            5 │     z = g(y);
              │     ^
              │
              = is a `;` missing at the end of the previous line?

            == trailing comma in arguments
            error: unexpected `)`; expected expression
              ┌─ test.nnef:4:13
              │
            4 │     y = f(x,);
              │             ^

            == expression on the left
            error: unexpected `+`; expected one of: `=`, `,`
              ┌─ test.nnef:4:7
              │
            4 │     y + 1 = f(x);
              │       ^

            == one-element tuple on the left
            error: unexpected `)`; expected `,`
              ┌─ test.nnef:4:7
              │
            4 │     (y) = f(x);
              │       ^

            == unbalanced parentheses
            error: unexpected `;`; expected one of: `)`, `,`
              ┌─ test.nnef:4:14
              │
            4 │     y = f((x);
              │              ^

            == end of file inside an expression
            error: unexpected end of file; expected expression
              ┌─ test.nnef:4:13
              │
            4 │     y = f(x,
              │             ^

            == double colon range
            error: unexpected `:`; expected `]`
              ┌─ test.nnef:4:14
              │
            4 │     y = x[1:2:3];
              │              ^

            == comprehension without yield
            error: unexpected identifier `i`; expected one of: operator, type argument `<T>`, `if`, `yield`, `(`, `,`
              ┌─ test.nnef:4:21
              │
            4 │     y = [for i in x i];
              │                     ^

            == if-else as a comprehension iterable
            error: unexpected keyword `else`; expected `yield`
              ┌─ test.nnef:4:26
              │
            4 │     y = [for i in a if c else b yield i];
              │                          ^^^^

            == if without else
            error: unexpected `;`; expected `else`
              ┌─ test.nnef:4:15
              │
            4 │     y = x if c;
              │               ^

            == keyword as an identifier
            error: unexpected keyword `graph`; expected one of: identifier, `(`, `[`
              ┌─ test.nnef:4:5
              │
            4 │     graph = f(x);
              │     ^^^^^

            == keyword in an expression
            error: unexpected keyword `for`; expected expression
              ┌─ test.nnef:4:14
              │
            4 │     y = f(x, for);
              │              ^^^

            == array type as a generic argument
            error: unexpected `[`; expected `(`
              ┌─ test.nnef:4:21
              │
            4 │     y = cast<integer[]>(x);
              │                     ^

            == empty tuple
            error: unexpected `)`; expected expression
              ┌─ test.nnef:4:10
              │
            4 │     y = ();
              │          ^

            == type keyword without call
            error: unexpected `;`; expected `(`
              ┌─ test.nnef:4:15
              │
            4 │     y = scalar;
              │               ^

            == statement outside a body
            error: unexpected identifier `y`; expected one of: `extension`, `fragment`, `graph`
              ┌─ test.nnef:2:1
              │
            2 │ y = f(x);
              │ ^

            == fragment with invalid generic
            error: invalid generic declaration
              ┌─ test.nnef:2:12
              │
            2 │ fragment f<integer>(x: tensor<?>) -> (y: tensor<?>);
              │            ^^^^^^^ expected `<?>` or `<? = type>`

            == non-literal default
            error: unexpected identifier `a`; expected one of: integer literal, real literal, string literal, `true`, `false`, `(`, `[`, `-`
              ┌─ test.nnef:2:43
              │
            2 │ fragment f(x: tensor<scalar>, k: scalar = a) -> (y: tensor<scalar>);
              │                                           ^

            == negative default that is not a number
            error: unexpected identifier `a`; expected one of: integer literal, real literal
              ┌─ test.nnef:2:25
              │
            2 │ fragment f(k: scalar = -a) -> (y: tensor<scalar>);
              │                         ^

            == nested tensor type
            error: unexpected keyword `tensor`; expected `>`
              ┌─ test.nnef:2:22
              │
            2 │ fragment f(x: tensor<tensor<scalar>>) -> (y: tensor<scalar>);
              │                      ^^^^^^

            == missing parameter type
            error: unexpected `)`; expected `:`
              ┌─ test.nnef:2:13
              │
            2 │ fragment f(x) -> (y: tensor<scalar>);
              │             ^

            == fragment without terminator
            error: unexpected keyword `graph`; expected one of: `{`, `;`
              ┌─ test.nnef:3:1
              │
            3 │ graph g() -> () { x = f(); }
              │ ^^^^^
              │
              = is a `;` missing at the end of the previous line?

            == several broken statements
            error: unexpected `)`; expected expression
              ┌─ test.nnef:4:13
              │
            4 │     y = f(x,);
              │             ^

            error: unexpected `;`; expected expression
              ┌─ test.nnef:5:10
              │
            5 │     z = (;
              │          ^

            error: unexpected identifier `g`; expected one of: operator, `if`, `;`
              ┌─ test.nnef:7:14
              │
            7 │     v = f(x) g;
              │              ^

            error: invalid character `$`
              ┌─ test.nnef:8:11
              │
            8 │     u = x $ 2;
              │           ^ not valid in NNEF

            == errors in a fragment and in the graph
            error: unexpected `;`; expected expression
              ┌─ test.nnef:2:63
              │
            2 │ fragment f(x: tensor<scalar>) -> (y: tensor<scalar>) { y = x +; }
              │                                                               ^

            error: unexpected `;`; expected expression
              ┌─ test.nnef:3:29
              │
            3 │ graph g(x) -> (y) { y = [1, ; }
              │                             ^

            == two broken fragment declarations
            error: unexpected `)`; expected `:`
              ┌─ test.nnef:2:13
              │
            2 │ fragment f(x) -> (y: tensor<scalar>);
              │             ^

            error: unexpected keyword `tensor`; expected `:`
              ┌─ test.nnef:3:37
              │
            3 │ fragment h(x: tensor<scalar>) -> (y tensor<scalar>);
              │                                     ^^^^^^

            == broken fragment header, then a broken graph body
            error: unexpected identifier `a`; expected one of: integer literal, real literal, string literal, `true`, `false`, `(`, `[`, `-`
              ┌─ test.nnef:2:43
              │
            2 │ fragment f(x: tensor<scalar>, k: scalar = a) -> (y: tensor<scalar>)
              │                                           ^

            error: unexpected `)`; expected expression
              ┌─ test.nnef:7:29
              │
            7 │ graph g(x) -> (y) { y = f(x,); z = (; }
              │                             ^

            error: unexpected `;`; expected expression
              ┌─ test.nnef:7:37
              │
            7 │ graph g(x) -> (y) { y = f(x,); z = (; }
              │                                     ^

            == broken fragment and broken graph header
            error: unexpected keyword `tensor`; expected `>`
              ┌─ test.nnef:2:22
              │
            2 │ fragment f(x: tensor<tensor<scalar>>) -> (y: tensor<scalar>);
              │                      ^^^^^^

            error: unexpected `(`; expected `->`
              ┌─ test.nnef:3:12
              │
            3 │ graph g(x) (y) { y = f(x); }
              │            ^

            == fragment body never closed
            error: unexpected keyword `graph`; expected one of: identifier, `(`, `[`, `}`
              ┌─ test.nnef:5:1
              │
            5 │ graph g(x) -> (y) { y = f(x,); }
              │ ^^^^^

            error: unexpected `)`; expected expression
              ┌─ test.nnef:5:29
              │
            5 │ graph g(x) -> (y) { y = f(x,); }
              │                             ^

            == version without semicolon, then a broken fragment
            error: unexpected keyword `fragment`; expected `;`
              ┌─ test.nnef:2:1
              │
            2 │ fragment f(x) -> (y: tensor<scalar>);
              │ ^^^^^^^^
              │
              = is a `;` missing at the end of the previous line?

            error: unexpected `)`; expected `:`
              ┌─ test.nnef:2:13
              │
            2 │ fragment f(x) -> (y: tensor<scalar>);
              │             ^

            == broken extension, then a broken graph body
            error: unexpected `;`; expected identifier
              ┌─ test.nnef:2:44
              │
            2 │ extension KHR_enable_fragment_definitions, ;
              │                                            ^

            error: unexpected `)`; expected expression
              ┌─ test.nnef:3:29
              │
            3 │ graph g(x) -> (y) { y = f(x,); }
              │                             ^

            == invalid version number, then a broken graph body
            error: invalid version number
              ┌─ test.nnef:1:9
              │
            1 │ version 1;
              │         ^ expected `<major>.<minor>`, e.g. `1.0`

            error: unexpected `)`; expected expression
              ┌─ test.nnef:2:29
              │
            2 │ graph g(x) -> (y) { y = f(x,); }
              │                             ^

            == invalid generic declaration, then a broken fragment
            error: invalid generic declaration
              ┌─ test.nnef:2:12
              │
            2 │ fragment f<integer>(x: tensor<?>) -> (y: tensor<?>);
              │            ^^^^^^^ expected `<?>` or `<? = type>`

            error: unexpected `)`; expected `:`
              ┌─ test.nnef:3:13
              │
            3 │ fragment h(x) -> (y: tensor<scalar>);
              │             ^

        "#]],
    );
}

#[test]
fn library_errors() {
    check_errors(
        &[
            (
                "version in a library",
                "version 1.0;\nfragment f(x: integer) -> (y: integer);\n",
            ),
            (
                "graph in a library",
                "fragment f(x: integer) -> (y: integer);\ngraph g() -> () { x = f(); }\n",
            ),
            (
                "extension in a library",
                "extension KHR_enable_operator_expressions;\n",
            ),
            (
                "two broken fragments in a library",
                "fragment f(x) -> (y: integer);\nfragment g(x: integer) -> (y: integer) { y = x; }\nfragment h(x: integer) -> y: integer;\n",
            ),
        ],
        true,
        expect![[r#"
            == version in a library
            error: unexpected keyword `version`; expected `fragment`
              ┌─ test.nnef:1:1
              │
            1 │ version 1.0;
              │ ^^^^^^^

            == graph in a library
            error: unexpected keyword `graph`; expected `fragment`
              ┌─ test.nnef:2:1
              │
            2 │ graph g() -> () { x = f(); }
              │ ^^^^^

            == extension in a library
            error: unexpected keyword `extension`; expected `fragment`
              ┌─ test.nnef:1:1
              │
            1 │ extension KHR_enable_operator_expressions;
              │ ^^^^^^^^^

            == two broken fragments in a library
            error: unexpected `)`; expected `:`
              ┌─ test.nnef:1:13
              │
            1 │ fragment f(x) -> (y: integer);
              │             ^

            error: unexpected identifier `y`; expected `(`
              ┌─ test.nnef:3:27
              │
            3 │ fragment h(x: integer) -> y: integer;
              │                           ^

        "#]],
    );
}

// ---------------------------------------------------------------------------------------
// Model corpus

#[test]
fn parses_model_corpus() {
    let dir = std::path::Path::new("/work/shared/models");
    let Ok(entries) = std::fs::read_dir(dir) else {
        println!(
            "notice: {} not found, skipping the model corpus",
            dir.display()
        );
        return;
    };
    let mut paths: Vec<_> = entries
        .flatten()
        .map(|e| e.path().join("model.nnef/graph.nnef"))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    for path in &paths {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let out = run(&text, false);
        assert!(!out.starts_with("error"), "{}:\n{out}", path.display());
    }
    println!("parsed and round-tripped {} models", paths.len());
}

// ---------------------------------------------------------------------------------------
// Properties

const SAMPLE: &str = r#"version 1.0;
extension KHR_enable_fragment_definitions;
fragment f<?>( x: tensor<?>, k: scalar = -2.0, p: (integer,integer)[] = [] ) -> ( y: tensor<?> )
{
    y = x * k if k > 0.0 else [for i in range_of(p) if i in [1] yield p[i]][0:1];
}
graph g( a ) -> ( b, c )
{
    a = external<scalar>(shape = [1, 2]);   # comment
    b, c = f(a, k = 1e-3, s = "q'", t = 'u');
}
"#;

/// Fragments of NNEF text that mutations splice in.
const PIECES: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    "<?>",
    "<scalar>",
    "=",
    "==",
    ",",
    ";",
    ":",
    "-",
    "->",
    "^",
    "!",
    "?",
    "'",
    "\"",
    "#",
    "\n",
    " ",
    "if",
    "else",
    "for",
    "yield",
    "in",
    "graph",
    "fragment",
    "version",
    "1",
    "1.",
    "1e",
    "99999999999999999999",
    "x",
    "length_of",
    "tensor",
    "µ",
    "\0",
];

fn mutate(text: &str, edits: &[(usize, usize, usize)]) -> String {
    let mut s: Vec<u8> = text.as_bytes().to_vec();
    for &(pos, len, piece) in edits {
        let pos = pos % (s.len() + 1);
        let end = (pos + len % 8).min(s.len());
        let piece = PIECES[piece % PIECES.len()].as_bytes();
        s.splice(pos..end, piece.iter().copied());
    }
    // Splicing bytes may cut a multi-byte character; the parser takes `&str`.
    String::from_utf8_lossy(&s).into_owned()
}

fn is_keyword(s: &str) -> bool {
    matches!(s, "if" | "in" | "for" | "else" | "true")
}

/// Random expressions over every node kind the parser produces.
fn arb_expr() -> impl Strategy<Value = Expr> {
    let span = Span::default();
    let mk = move |kind: ExprKind| Expr { kind, span };
    let ident = || "[a-z][a-z0-9_]{0,3}".prop_filter("not a keyword", |s| !is_keyword(s));
    let leaf = prop_oneof![
        (0i64..1000).prop_map(move |i| mk(ExprKind::Literal(Literal::Integer(i)))),
        (0.0f64..1e6).prop_map(move |x| mk(ExprKind::Literal(Literal::Scalar(x)))),
        any::<bool>().prop_map(move |b| mk(ExprKind::Literal(Literal::Logical(b)))),
        "[a-z '\"]{0,4}"
            .prop_filter("one quote style", |s| !(s.contains('\'')
                && s.contains('"')))
            .prop_map(move |s| mk(ExprKind::Literal(Literal::String(s)))),
        ident().prop_map(move |n| mk(ExprKind::Ident(n))),
    ];
    leaf.prop_recursive(4, 48, 3, move |inner| {
        let b = |e: Expr| Box::new(e);
        let binop = prop_oneof![
            Just(BinaryOp::Add),
            Just(BinaryOp::Sub),
            Just(BinaryOp::Mul),
            Just(BinaryOp::Div),
            Just(BinaryOp::Pow),
            Just(BinaryOp::Lt),
            Just(BinaryOp::Ge),
            Just(BinaryOp::Eq),
            Just(BinaryOp::And),
            Just(BinaryOp::Or),
            Just(BinaryOp::In),
        ];
        let unop = prop_oneof![Just(UnaryOp::Neg), Just(UnaryOp::Plus), Just(UnaryOp::Not)];
        let id = "[a-z][a-z0-9_]{0,3}".prop_filter("not a keyword", |s| !is_keyword(s));
        prop_oneof![
            (binop, inner.clone(), inner.clone()).prop_map(move |(op, l, r)| mk(
                ExprKind::Binary {
                    op,
                    lhs: b(l),
                    rhs: b(r)
                }
            )),
            (unop, inner.clone())
                .prop_map(move |(op, e)| mk(ExprKind::Unary { op, operand: b(e) })),
            (inner.clone(), inner.clone(), inner.clone()).prop_map(move |(c, t, o)| mk(
                ExprKind::IfElse {
                    cond: b(c),
                    then: b(t),
                    otherwise: b(o)
                }
            )),
            prop::collection::vec(inner.clone(), 0..3).prop_map(move |v| mk(ExprKind::Array(v))),
            prop::collection::vec(inner.clone(), 2..4).prop_map(move |v| mk(ExprKind::Tuple(v))),
            (inner.clone(), inner.clone()).prop_map(move |(x, i)| mk(ExprKind::Subscript {
                base: b(x),
                index: Box::new(Index::Single(i))
            })),
            (
                inner.clone(),
                prop::option::of(inner.clone()),
                prop::option::of(inner.clone())
            )
                .prop_map(move |(x, i, j)| mk(ExprKind::Subscript {
                    base: b(x),
                    index: Box::new(Index::Range(i, j))
                })),
            (
                id.clone(),
                inner.clone(),
                prop::option::of(inner.clone()),
                inner.clone()
            )
                .prop_map(move |(n, it, f, body)| mk(ExprKind::Comprehension {
                    iters: vec![(IterPattern::Name(Ident { name: n, span }), it)],
                    filter: f.map(b),
                    body: b(body),
                })),
            (
                id.clone(),
                prop::collection::vec((prop::option::of(id), inner.clone()), 0..3)
            )
                .prop_map(move |(n, args)| mk(ExprKind::Invocation {
                    name: Ident { name: n, span },
                    generic: None,
                    args: args
                        .into_iter()
                        .map(|(name, value)| Arg {
                            name: name.map(|name| Ident { name, span }),
                            value,
                            span
                        })
                        .collect(),
                })),
            inner.clone().prop_map(move |e| mk(ExprKind::Builtin {
                func: Builtin::LengthOf,
                arg: b(e)
            })),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_text_never_panics(text in "\\PC{0,200}") {
        let _ = parse_document(FileId(0), &text);
        let _ = parse_library(FileId(0), &text);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_document(FileId(0), &text);
        let _ = parse_library(FileId(0), &text);
    }

    #[test]
    fn mutated_documents_never_panic(edits in prop::collection::vec((0usize..2000, 0usize..8, 0usize..100), 1..6)) {
        let text = mutate(SAMPLE, &edits);
        let mut sources = SourceMap::new();
        let file = sources.add("m.nnef", text.as_str());
        if let Err(d) = parse_document(file, &text) {
            // Rendering must not panic either (spans stay inside the text).
            let _ = d.render(&sources);
        }
    }

    #[test]
    fn printed_expressions_parse_back(e in arb_expr()) {
        let text = format!("version 1.0;\ngraph g() -> () {{\n    x = {};\n}}\n", print::expr(&e));
        let doc = parse_document(FileId(0), &text);
        prop_assert!(doc.is_ok(), "does not parse: {}", text);
        let mut rhs = doc.ok().and_then(|d| d.graph).map(|g| g.body[0].rhs.clone());
        if let Some(r) = &mut rhs {
            strip_expr(r);
        }
        prop_assert_eq!(rhs, Some(e), "{}", text);
    }
}

/// Guards against a parser generated from another worktree's grammar (see `build.rs`).
#[test]
fn generated_parser_matches_grammar() {
    let generated_from = include_str!(concat!(
        env!("OUT_DIR"),
        "/front/syntax/nnef.lalrpop.source"
    ));
    assert!(
        generated_from == include_str!("nnef.lalrpop"),
        "the parser in OUT_DIR was generated from a different nnef.lalrpop (shared target dir?); \
         run `touch compiler/src/front/syntax/nnef.lalrpop` and rebuild"
    );
}

/// Pathologically deep input is refused with a diagnostic before the tree gets deep
/// enough to overflow the stack (in the parser, the printer or `Drop`).
#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let n = 100_000;
    let cases = [
        format!("x = {}1;", "-".repeat(n)),
        format!("x = {}1{};", "(".repeat(n), ")".repeat(n)),
        format!("x = {}1{};", "[".repeat(n), "]".repeat(n)),
        format!("x = a{};", "[0]".repeat(n)),
        format!("x = 1{};", " + 1".repeat(n)),
        format!("x = 2{};", " ^ 2".repeat(n)),
        format!("x = {}1{};", "f(".repeat(n), ")".repeat(n)),
        // Fails to parse after the deep part: the partial tree must drop safely too.
        format!("x = {}1 +;", "-".repeat(n)),
    ];
    for body in &cases {
        let text = format!("version 1.0;\ngraph g() -> () {{ {body} }}\n");
        match parse_document(FileId(0), &text) {
            Ok(_) => panic!("accepted a {n}-deep expression"),
            Err(d) => assert!(
                first_message(&d).contains("nested too deeply"),
                "{}: {d}",
                &body[..20],
            ),
        }
    }
    // Wide is fine: a long flat array and a long argument list are not deep.
    let wide = format!(
        "version 1.0;\ngraph g() -> () {{ x = constant(shape = [{n}], value = [{}]); }}\n",
        vec!["-1.5"; n].join(", ")
    );
    assert!(parse_document(FileId(0), &wide).is_ok());
    // Just under the limit parses, prints and parses back.
    let ok = format!(
        "version 1.0;\ngraph g() -> () {{ x = {}1; }}\n",
        "-".repeat(200)
    );
    run(&ok, false);
}
