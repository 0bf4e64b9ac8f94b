//! protoc-free codegen: protox (a pure Rust .proto compiler) produces the
//! FileDescriptorSet and tonic-prost-build turns it into Rust.
use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_source_info(true).include_imports(true);
    compiler.open_files([
        "telos/v1/play.proto",
        "telos/v1/handoff.proto",
        "telos/v1/admin.proto",
    ])?;
    for file in compiler.files() {
        if let Some(path) = file.path() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
