//! Per-op differential tests: compiled object vs a reference.

use super::harness::{Rng, assert_close, load, opts};
use crate::ir::{BinaryOp, DType, Graph, Op, Tensor, TensorType, UnaryOp};

fn unary_graph(op: UnaryOp, shape: &[usize]) -> Graph {
    let mut g = Graph::new("u");
    let ty = TensorType::new(DType::F32, shape);
    let x = g.add_input("x", ty.clone());
    let y = g.add_node(Op::Unary(op), vec![x], vec![ty])[0];
    g.outputs.push(y);
    g
}

#[test]
fn relu_end_to_end() {
    for n in [1usize, 3, 4, 7, 8, 9, 33] {
        let g = unary_graph(UnaryOp::Relu, &[n]);
        let m = load(&g, &opts("relu"));
        let x = Rng::new(n as u64).tensor(DType::F32, &[n], -2.0, 2.0);
        let got = m.run(&[x.clone()]).expect("status 0");
        let want = Tensor::f32(vec![n], x.as_f32().unwrap().iter().map(|v| v.max(0.0)).collect());
        assert_close(&format!("relu n={n}"), &got[0], &want);
    }
}

#[test]
fn add_broadcast_end_to_end() {
    let mut g = Graph::new("add");
    let x = g.add_input("x", TensorType::new(DType::F32, &[2, 3, 5]));
    let b = g.add_input("b", TensorType::new(DType::F32, &[2, 3]));
    let y = g.add_node(Op::Binary(BinaryOp::Add), vec![x, b], vec![TensorType::new(DType::F32, &[2, 3, 5])])[0];
    g.outputs.push(y);
    let m = load(&g, &opts("addb"));
    let mut r = Rng::new(7);
    let xt = r.tensor(DType::F32, &[2, 3, 5], -1.0, 1.0);
    let bt = r.tensor(DType::F32, &[2, 3], -1.0, 1.0);
    let got = m.run(&[xt.clone(), bt.clone()]).expect("status 0");
    let (xv, bv) = (xt.as_f32().unwrap(), bt.as_f32().unwrap());
    let want = Tensor::f32(vec![2, 3, 5], (0..30).map(|i| xv[i] + bv[i / 5]).collect());
    assert_close("add", &got[0], &want);
}

#[test]
fn object_is_deterministic() {
    let g = unary_graph(UnaryOp::Tanh, &[2, 17]);
    let a = crate::back::compile(&g, &opts("det")).unwrap();
    let b = crate::back::compile(&g, &opts("det")).unwrap();
    assert!(a.object == b.object, "two compiles differ");
}

#[test]
fn null_and_misaligned_pointers_give_status() {
    let g = unary_graph(UnaryOp::Relu, &[4]);
    let m = load(&g, &opts("st"));
    let x = [0f32; 4];
    let mut y = [0f32; 4];
    let ip = [x.as_ptr() as *const u8];
    let op = [y.as_mut_ptr() as *mut u8];
    // SAFETY: pointers cover 4 floats; the model has no workspace.
    unsafe {
        assert_eq!(m.run_raw(std::ptr::null(), op.as_ptr(), std::ptr::null_mut()), 1);
        assert_eq!(m.run_raw(ip.as_ptr(), std::ptr::null(), std::ptr::null_mut()), 1);
        let nul = [std::ptr::null::<u8>()];
        assert_eq!(m.run_raw(nul.as_ptr(), op.as_ptr(), std::ptr::null_mut()), 1);
        assert_eq!(m.run_raw(ip.as_ptr(), op.as_ptr(), std::ptr::null_mut()), 0);
    }
}
