//! Finds libpvllm for the linker: `PVLLM_LIB_DIR` (a folder holding
//! libpvllm.so) wins; otherwise `pkg-config pvllm` (the library installs a
//! pvllm.pc); otherwise the linker's default search path, with a warning.
//!
//! pkg-config is run as a command rather than through a crate so that the
//! SDK needs no third-party crates. `PKG_CONFIG` names another binary.
use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    for var in [
        "PVLLM_LIB_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "PKG_CONFIG_SYSROOT_DIR",
    ] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    println!("cargo:rerun-if-changed=build.rs");

    if let Some(dir) = env::var_os("PVLLM_LIB_DIR").filter(|d| !d.is_empty()) {
        let dir = Path::new(&dir);
        if !dir.join("libpvllm.so").exists() && !dir.join("libpvllm.dylib").exists() {
            println!(
                "cargo:warning=PVLLM_LIB_DIR={} holds no libpvllm.so; linking may fail",
                dir.display()
            );
        }
        link(&[dir.display().to_string()], &["pvllm".to_string()]);
        return;
    }

    match pkg_config_libs() {
        Ok((dirs, libs)) => link(&dirs, &libs),
        Err(why) => {
            println!(
                "cargo:warning=pvllm not found through PVLLM_LIB_DIR or pkg-config ({}); \
                 relying on the linker's default search path",
                why
            );
            link(&[], &["pvllm".to_string()]);
        }
    }
}

/// Emits the link flags, and `DEP_PVLLM_LIB_DIR` for crates that depend on
/// this one (through `links = "pvllm"`).
fn link(dirs: &[String], libs: &[String]) {
    for dir in dirs {
        println!("cargo:rustc-link-search=native={}", dir);
    }
    if let Some(dir) = dirs.first() {
        println!("cargo:lib_dir={}", dir);
    }
    for lib in libs {
        println!("cargo:rustc-link-lib=dylib={}", lib);
    }
}

/// `pkg-config --libs pvllm`, split into -L folders and -l names.
fn pkg_config_libs() -> Result<(Vec<String>, Vec<String>), String> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = Command::new(&program)
        .args(["--libs", "pvllm"])
        .output()
        .map_err(|e| format!("cannot run {}: {}", program, e))?;
    if !output.status.success() {
        // cargo:warning takes one line.
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(stderr
            .lines()
            .next()
            .unwrap_or("pkg-config failed")
            .trim()
            .to_string());
    }
    let flags = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut dirs = Vec::new();
    let mut libs = Vec::new();
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            dirs.push(dir.to_string());
        } else if let Some(lib) = flag.strip_prefix("-l") {
            libs.push(lib.to_string());
        }
    }
    if !libs.iter().any(|l| l == "pvllm") {
        libs.push("pvllm".to_string());
    }
    Ok((dirs, libs))
}
