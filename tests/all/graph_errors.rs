//! Every validation error of the graph builder (`nnefc::graph`), data-driven: each named
//! case builds something wrong and returns the error; the texts (and the warnings of
//! `finish`) are compared with `graph_errors.txt` (`UPDATE_EXPECT=1` to bless). Each error
//! must point at the line of this file that made it, except whole-graph errors of
//! `finish`, which point at the offending call or nowhere.

use nnefc::compiler::ir::{DType, Tensor};
use nnefc::graph::{Arg, Error, Graph, Value, ops};

fn input(g: &Graph, name: &str, shape: &[usize]) -> Value {
    g.input(name, DType::F32, shape).expect("input")
}

fn split_args(x: &Value) -> Vec<(Option<&'static str>, Arg)> {
    vec![
        (None, x.into()),
        (Some("axis"), 1.into()),
        (Some("ratios"), vec![1, 1].into()),
    ]
}

/// Whether the error comes from `finish` (may have no location).
#[derive(Clone, Copy, PartialEq)]
enum From {
    Call,
    Finish,
}

type Case = (&'static str, From, fn() -> Error);

const CASES: &[Case] = &[
    ("value from another graph used in an op", From::Call, || {
        let (g1, g2) = (Graph::new("one"), Graph::new("two"));
        let (x, y) = (input(&g1, "x", &[1, 3]), input(&g2, "y", &[1, 3]));
        ops::add(&y, &x).unwrap_err()
    }),
    ("value from another graph as an output", From::Call, || {
        let (g1, g2) = (Graph::new("one"), Graph::new("two"));
        let x = input(&g1, "x", &[1, 3]);
        g2.output("y", &x).unwrap_err()
    }),
    ("output name given twice", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 3]);
        let (a, b) = (ops::relu(&x).unwrap(), ops::tanh(&x).unwrap());
        g.output("y", &a).unwrap();
        g.output("y", &b).unwrap_err()
    }),
    ("array result used as one value", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 4]);
        g.call("split", None, split_args(&x))
            .unwrap()
            .single()
            .unwrap_err()
    }),
    ("wrong number of parts", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 4]);
        let out = g
            .call(
                "moments",
                None,
                vec![(None, x.into()), (Some("axes"), vec![1].into())],
            )
            .unwrap();
        out.parts(3).unwrap_err()
    }),
    ("finish with no outputs", From::Finish, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 3]);
        ops::relu(&x).unwrap();
        g.finish().unwrap_err()
    }),
    ("placeholder never connected", From::Finish, || {
        let g = Graph::new("g");
        let p = g.placeholder(DType::F32, &[Some(1), Some(3)]);
        let y = ops::relu(&p).unwrap();
        g.output("y", &y).unwrap();
        g.finish().unwrap_err()
    }),
    ("placeholder connected twice", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 3]);
        let p = g.placeholder(DType::F32, &[Some(1), Some(3)]);
        g.connect(&p, &x).unwrap();
        g.connect(&p, &x).unwrap_err()
    }),
    ("connecting a non-placeholder", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 3]);
        let y = ops::relu(&x).unwrap();
        g.connect(&y, &x).unwrap_err()
    }),
    ("connect with mismatched type", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 4]);
        let p = g.placeholder(DType::F32, &[Some(1), Some(3)]);
        g.connect(&p, &x).unwrap_err()
    }),
    ("connect with another data type", From::Call, || {
        let g = Graph::new("g");
        let x = g.input("x", DType::I32, &[1, 3]).unwrap();
        let p = g.placeholder(DType::F32, &[None, Some(3)]);
        g.connect(&p, &x).unwrap_err()
    }),
    ("cycle through a placeholder", From::Finish, || {
        let g = Graph::new("g");
        let p = g.placeholder(DType::F32, &[Some(1), Some(3)]);
        let y = ops::relu(&p).unwrap();
        let z = ops::add(&y, 1.0_f32).unwrap();
        g.connect(&p, &z).unwrap();
        g.output("z", &z).unwrap();
        g.finish().unwrap_err()
    }),
    ("add of shapes [1,3] and [1,4]", From::Call, || {
        let g = Graph::new("g");
        let (a, b) = (input(&g, "a", &[1, 3]), input(&g, "b", &[1, 4]));
        ops::add(&a, &b).unwrap_err()
    }),
    ("conv with the wrong channel count", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 3, 8, 8]);
        let w = g
            .variable("w", Tensor::zeros(DType::F32, vec![4, 2, 3, 3]))
            .unwrap();
        ops::conv(&x, &w, ops::ConvAttrs::default()).unwrap_err()
    }),
    ("attribute of the wrong type", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 3, 8, 8]);
        let w = g
            .variable("w", Tensor::zeros(DType::F32, vec![4, 3, 3, 3]))
            .unwrap();
        g.call(
            "conv",
            None,
            vec![
                (None, x.into()),
                (None, w.into()),
                (Some("stride"), Arg::Scalar(2.0)),
            ],
        )
        .unwrap_err()
    }),
    ("unknown op with a suggestion", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 3]);
        g.call("relus", None, vec![(None, x.into())]).unwrap_err()
    }),
    ("unknown parameter name", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 3]);
        g.call(
            "relu",
            None,
            vec![(None, x.into()), (Some("alpha"), 0.5_f32.into())],
        )
        .unwrap_err()
    }),
    ("missing required argument", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 3, 8, 8]);
        g.call("conv", None, vec![(None, x.into())]).unwrap_err()
    }),
    ("too many positional arguments", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 3]);
        g.call("relu", None, vec![(None, (&x).into()), (None, x.into())])
            .unwrap_err()
    }),
    ("external called directly", From::Call, || {
        let g = Graph::new("g");
        g.call(
            "external",
            Some(DType::F32),
            vec![(Some("shape"), vec![1].into())],
        )
        .unwrap_err()
    }),
    ("op function without a tensor argument", From::Call, || {
        ops::relu(1.0_f32).unwrap_err()
    }),
    ("invalid input name", From::Call, || {
        Graph::new("g").input("2x", DType::F32, &[1]).unwrap_err()
    }),
    ("keyword as input name", From::Call, || {
        Graph::new("g")
            .input("graph", DType::F32, &[1])
            .unwrap_err()
    }),
    ("duplicate input name", From::Call, || {
        let g = Graph::new("g");
        input(&g, "x", &[1]);
        g.input("x", DType::F32, &[2]).unwrap_err()
    }),
    ("bad variable label", From::Call, || {
        let g = Graph::new("g");
        g.variable("../w", Tensor::zeros(DType::F32, vec![1]))
            .unwrap_err()
    }),
    ("variable label used twice", From::Call, || {
        let g = Graph::new("g");
        g.variable("w", Tensor::zeros(DType::F32, vec![1])).unwrap();
        g.variable("w", Tensor::zeros(DType::F32, vec![2]))
            .unwrap_err()
    }),
    ("variable from a missing file", From::Call, || {
        let g = Graph::new("g");
        let missing = std::path::Path::new("/nonexistent/w.dat");
        g.variable_from_file("w", missing).unwrap_err()
    }),
    ("non-finite scalar attribute", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 3]);
        ops::add(&x, f32::NAN).unwrap_err()
    }),
    ("explicit type on a non-generic op", From::Call, || {
        let g = Graph::new("g");
        let x = input(&g, "x", &[1, 3]);
        g.call("relu", Some(DType::F32), vec![(None, x.into())])
            .unwrap_err()
    }),
    ("fragment body without outputs", From::Call, || {
        let (g, body) = (Graph::new("g"), Graph::new("body"));
        input(&body, "x", &[1, 3]);
        g.define_fragment("f", &body).unwrap_err()
    }),
    ("fragment with an invalid name", From::Call, || {
        let (g, body) = (Graph::new("g"), Graph::new("body"));
        let x = input(&body, "x", &[1, 3]);
        body.output("y", &ops::relu(&x).unwrap()).unwrap();
        g.define_fragment("my-fragment", &body).unwrap_err()
    }),
    ("fragment using a variable", From::Call, || {
        let (g, body) = (Graph::new("g"), Graph::new("body"));
        let x = input(&body, "x", &[1, 3]);
        let w = body
            .variable("w", Tensor::zeros(DType::F32, vec![1, 3]))
            .unwrap();
        body.output("y", &ops::mul(&x, &w).unwrap()).unwrap();
        g.define_fragment("f", &body).unwrap_err()
    }),
];

/// The warnings of a graph with an unused input and a dead node.
fn warnings() -> Vec<String> {
    let g = Graph::new("g");
    let x = input(&g, "x", &[1, 3]);
    input(&g, "unused", &[1, 3]);
    let _dead = ops::tanh(&x).unwrap();
    g.output("y", &ops::relu(&x).unwrap()).unwrap();
    g.finish().unwrap().warnings
}

#[test]
fn graph_errors_have_their_expected_text() {
    let mut text = String::new();
    for (name, from, case) in CASES {
        let err = case();
        match (err.location, from) {
            (Some(l), _) => assert!(
                l.file().ends_with("graph_errors.rs"),
                "{name}: the error points at {}:{}, not at the test",
                l.file(),
                l.line()
            ),
            (None, From::Finish) => {}
            (None, From::Call) => panic!("{name}: the error has no location"),
        }
        text.push_str(&format!("== {name} ==\n{}\n", err.text()));
    }
    text.push_str("== warnings: an unused input and a dead node ==\n");
    for w in warnings() {
        text.push_str(&format!("warning: {w}\n"));
    }
    expect_test::expect_file!["graph_errors.txt"].assert_eq(&text);
}
