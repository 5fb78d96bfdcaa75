//! Compiles `zermelo.proto` into Rust with protox (a protobuf compiler written in Rust, so the
//! build needs no system `protoc`) and tonic-prost-build (messages, client and server).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=zermelo.proto");
    let descriptors = protox::compile(["zermelo.proto"], ["."])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
