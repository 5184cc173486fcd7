//! One broken graph per invariant, each asserting the rendered error.

use super::*;
use crate::ir::graph::{Constant, Node};
use crate::ir::op::{Op, UnaryOp};
use crate::ir::parse::parse;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, Dim, Layout};
use expect_test::expect;

const BASE: &str = "nnefir 1
graph g(%v0 \"x\": f32[1,4]) -> (%v2) {
  %c0: f32[1,4] = const [1.0,2.0,3.0,4.0]
  %v1: f32[1,4] = add(%v0, %c0)
  %v2: f32[1,4] = relu(%v1)
}
";

fn base() -> Graph {
    parse(BASE).expect("base parses")
}

fn check_text(text: &str) -> String {
    match verify(&parse(text).expect("test graph parses")) {
        Ok(()) => "ok\n".to_string(),
        Err(es) => render_errors(&es),
    }
}

fn check_graph(g: &Graph) -> String {
    match verify(g) {
        Ok(()) => "ok\n".to_string(),
        Err(es) => render_errors(&es),
    }
}

#[test]
fn valid_graph_passes() {
    assert_eq!(verify(&base()), Ok(()));
}

#[test]
fn reference_errors() {
    let mut s = String::new();
    // R1: input list names a node output.
    let mut g = base();
    g.inputs[0] = ValueId(2);
    s += &check_graph(&g);
    // R1: out of range input.
    let mut g = base();
    g.inputs.push(ValueId(99));
    s += &check_graph(&g);
    // R2: value claims a node that does not produce it.
    let mut g = base();
    g.values[1].def = ValueDef::Node(NodeId(5), 0);
    s += &check_graph(&g);
    // R2/R3: value refers to a missing constant; constant left without a value.
    let mut g = base();
    g.values[1].def = ValueDef::Const(ConstId(3));
    s += &check_graph(&g);
    // R3: a constant shared by two values.
    let mut g = base();
    g.values.push(crate::ir::graph::Value {
        ty: g.values[1].ty.clone(),
        def: ValueDef::Const(ConstId(0)),
        name: None,
    });
    s += &check_graph(&g);
    // R4: node output out of range.
    let mut g = base();
    g.nodes[1].outputs.push(ValueId(40));
    s += &check_graph(&g);
    // R5: use before definition (nodes swapped).
    let mut g = base();
    g.nodes.swap(0, 1);
    for (ni, n) in g.nodes.iter().enumerate() {
        for &o in &n.outputs {
            g.values[o.index()].def = ValueDef::Node(NodeId(ni as u32), 0);
        }
    }
    s += &check_graph(&g);
    // R5: operand out of range.
    let mut g = base();
    g.nodes[0].inputs[1] = ValueId(17);
    s += &check_graph(&g);
    // R6: graph output out of range.
    let mut g = base();
    g.outputs.push(ValueId(9));
    s += &check_graph(&g);
    expect![[r#"
        graph g(%v0: f32[1,4]) -> (%v1) {
          ; error: input 0 is %v0, which is output 0 of node #n0
        graph g(%v0: f32[1,4]) -> (%v1) {
          ; error: %v2 claims to be input 0, but the graph does not list it there
        ; 2 errors
        graph g(%v0 "x": f32[1,4], %invalid99) -> (%v2) {
          ; error: input 1 is %invalid99, out of range (4 values)
        ; 1 error
        value %v3
          ; error: %v3 claims to be output 0 of node #n5, which does not produce it
        constant %c0 (no value refers to it)
          ; error: constant %c0 is referred to by 0 values (must be exactly 1)
        %v1: f32[1,4] = add(%v0, %v3)
          ; error: operand 1 (%v3) is used before it is defined (by node #n5)
        ; 3 errors
        %c0: f32[1,4] = const ; missing constant %c3
          ; error: %c0 refers to constant %c3, out of range (1 constants)
        constant %c0 (no value refers to it)
          ; error: constant %c0 is referred to by 0 values (must be exactly 1)
        ; 2 errors
        %c0: f32[1,4] = const      ; 16 B
          ; error: constant %c0 is referred to by 2 values (must be exactly 1)
        ; 1 error
        %v2: f32[1,4], %invalid40 = relu(%v1)
          ; error: output 1 is %invalid40, out of range (4 values)
        ; 1 error
        %v1: f32[1,4] = relu(%v2)
          ; error: operand 0 (%v2) is used before it is defined (by node #n1)
        ; 1 error
        %v1: f32[1,4] = add(%v0, %invalid17)
          ; error: operand 1 is %invalid17, out of range (4 values)
        ; 1 error
        graph g(%v0 "x": f32[1,4]) -> (%v2, %invalid9) {
          ; error: output 1 is %invalid9, out of range (4 values)
        ; 1 error
    "#]]
    .assert_eq(&s);
}

#[test]
fn type_errors() {
    let mut s = String::new();
    // T1: layout not a permutation.
    let mut g = base();
    g.values[3].ty.layout = Layout {
        minor_to_major: vec![0, 0],
    };
    s += &check_graph(&g);
    // T2: constant data length disagrees with its shape.
    let mut g = base();
    g.consts[0].tensor.shape = vec![1, 5];
    s += &check_graph(&g);
    // T2: value type differs from the constant's.
    let mut g = base();
    g.consts[0] = Constant {
        tensor: Tensor::i32(vec![1, 4], vec![1, 2, 3, 4]),
        label: None,
    };
    s += &check_graph(&g);
    // T3: stored type differs from infer.
    let mut g = base();
    g.values[3].ty.dims = vec![Dim::Known(4), Dim::Known(1)];
    s += &check_graph(&g);
    // T3: dtype differs.
    let mut g = base();
    g.values[3].ty.dtype = DType::I32;
    s += &check_graph(&g);
    // T3: wrong output count.
    let mut g = base();
    g.nodes[1].outputs.clear();
    g.values[3].def = ValueDef::Input(5);
    s += &check_graph(&g);
    // T3: wrong arity.
    let mut g = base();
    g.nodes[1].inputs.push(ValueId(0));
    s += &check_graph(&g);
    // T3: dtype rule.
    let mut g = base();
    g.nodes[1].op = Op::Unary(UnaryOp::Not);
    s += &check_graph(&g);
    expect![[r#"
        %v2: f32[1,4]{0,0} = relu(%v1)
          ; error: layout [0, 0] of %v2 is not a permutation of 0..2
        ; 1 error
        %c0: f32[1,4] = const      ; 16 B
          ; error: constant data has 4 elements but its shape [1, 5] has 5
        ; 1 error
        %c0: f32[1,4] = const      ; 16 B
          ; error: value type f32[1,4] differs from its constant's type i32[1,4]
        ; 1 error
        %v2: f32[4,1] = relu(%v1)
          ; error: output 0 (%v2) has type f32[4,1] but relu gives f32[1,4]
        ; 1 error
        %v2: i32[1,4] = relu(%v1)
          ; error: output 0 (%v2) has type i32[1,4] but relu gives f32[1,4]
        ; 1 error
        graph g(%v0 "x": f32[1,4]) -> (%v2) {
          ; error: %v2 claims to be input 5, but the graph does not list it there
        ; 1 error
        %v2: f32[1,4] = relu(%v1, %v0)
          ; error: relu expects 1 operand, got 2
        ; 1 error
        %v2: f32[1,4] = not(%v1)
          ; error: not operand must be bool, got f32[1,4]
        ; 1 error
    "#]]
    .assert_eq(&s);
}

#[test]
fn attribute_errors() {
    let cases = [
        "  %v1: f32[1,4] = sum_reduce(%v0) axes=[1,0]\n",
        "  %v1: f32[1,4] = sum_reduce(%v0) axes=[2]\n",
        "  %v1: f32[1,4] = transpose(%v0) axes=[1,1]\n",
        "  %v1: f32[1,4] = squeeze(%v0) axes=[1]\n",
        "  %v1: f32[1,4] = pad(%v0) padding=[(1,1)] border=constant value=0.0\n",
        "  %v1: f32[1,4] = tile(%v0) repeats=[1,0]\n",
        "  %v1: f32[1,4] = split(%v0) axis=1 ratios=[3]\n",
        "  %v1: f32[1,4] = slice(%v0) axes=[1] begin=[0] end=[2] stride=[0]\n",
        "  %v1: f32[1,4] = max_pool(%v0) size=[1,9] border=constant padding=[(0,0),(0,0)] stride=[] dilation=[]\n",
        "  %v1: f32[1,4] = softmax(%v0) axes=[1,1]\n",
        "  %v1: f32[1,4] = reshape(%v0) shape=[3,-1] axis_start=0 axis_count=-1\n",
        "  %v1: f32[1,4] = unsqueeze(%v0) axes=[3]\n",
    ];
    let mut s = String::new();
    for body in cases {
        let text = format!("nnefir 1\ngraph g(%v0: f32[1,4]) -> (%v1) {{\n{body}}}\n");
        s += &check_text(&text);
    }
    // groups must divide channels (conv on a rank-3 input).
    s += &check_text(
        "nnefir 1\ngraph g(%v0: f32[1,6,5], %v1: f32[4,3,1], %v2: f32[]) -> (%v3) {\n  %v3: f32[1,4,5] = conv(%v0, %v1, %v2) border=constant padding=[] stride=[] dilation=[] groups=4\n}\n",
    );
    expect![[r#"
        %v1: f32[1,4] = sum_reduce(%v0) axes=[1,0]
          ; error: sum_reduce axes [1,0] must be sorted
        ; 1 error
        %v1: f32[1,4] = sum_reduce(%v0) axes=[2]
          ; error: sum_reduce axis 2 is out of range for rank 2
        ; 1 error
        %v1: f32[1,4] = transpose(%v0) axes=[1,1]
          ; error: transpose axes [1,1] are not a permutation of 0..2
        ; 1 error
        %v1: f32[1,4] = squeeze(%v0) axes=[1]
          ; error: squeeze axis 1 of f32[1,4] has extent 4, not 1
        ; 1 error
        %v1: f32[1,4] = pad(%v0) padding=[(1,1)] border=constant value=0.0
          ; error: pad padding has 1 item but the op needs 2
        ; 1 error
        %v1: f32[1,4] = tile(%v0) repeats=[1,0]
          ; error: tile repeats [1,0] has 0 at index 1; items must be ≥ 1
        ; 1 error
        %v1: f32[1,4] = split(%v0) axis=1 ratios=[3]
          ; error: split of extent 4 at axis 1 by ratios [3] (sum 3) is not exact
        ; 1 error
        %v1: f32[1,4] = slice(%v0) axes=[1] begin=[0] end=[2] stride=[0]
          ; error: slice stride on axis 1 is 0
        ; 1 error
        %v1: f32[1,4] = max_pool(%v0) size=[1,9] border=constant padding=[(0,0),(0,0)] stride=[] dilation=[]
          ; error: max_pool window of extent 9 (size 9, dilation 1) does not fit input extent 4 with padding (0,0) at axis 1
        ; 1 error
        %v1: f32[1,4] = softmax(%v0) axes=[1,1]
          ; error: softmax axes [1,1] repeat axis 1
        ; 1 error
        %v1: f32[1,4] = reshape(%v0) shape=[3,-1] axis_start=0 axis_count=-1
          ; error: cannot reshape [1,4] to [3,-1]: volume 4 is not a multiple of 3
        ; 1 error
        %v1: f32[1,4] = unsqueeze(%v0) axes=[3]
          ; error: unsqueeze axis 3 is out of range for rank 3
        ; 1 error
        %v3: f32[1,4,5] = conv(%v0, %v1, %v2) border=constant padding=[] stride=[] dilation=[] groups=4
          ; error: groups = 4 does not divide input channels 6
        ; 1 error
    "#]]
    .assert_eq(&s);
}

#[test]
fn errors_accumulate_within_a_phase() {
    let mut g = base();
    g.values[2].ty.dims = vec![Dim::Known(2), Dim::Known(4)];
    g.values[3].ty.dims = vec![Dim::Known(3), Dim::Known(4)];
    let errs = verify(&g).expect_err("two type errors");
    assert_eq!(errs.len(), 2);
    assert_eq!(errs[0].at, Location::Node(NodeId(0)));
    // Nodes with empty names still print: constructed directly, not parsed.
    let mut g = Graph::new("x");
    g.nodes.push(Node {
        op: Op::Unary(UnaryOp::Relu),
        inputs: vec![ValueId(0)],
        outputs: vec![],
    });
    let errs = verify(&g).expect_err("dangling operand");
    assert_eq!(
        errs[0].message,
        "operand 0 is %invalid0, out of range (0 values)"
    );
}
