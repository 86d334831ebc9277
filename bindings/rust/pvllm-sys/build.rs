//! Finds libpvllm for the linker: `PVLLM_LIB_DIR` (a folder holding
//! libpvllm.so) wins; otherwise `pkg-config pvllm` (the library installs a
//! pvllm.pc); otherwise the linker's default search path, with a warning.
//!
//! With the `bundled` feature it builds libpvllm from source instead (CPU
//! backend only) with CMake, into OUT_DIR, and links that: the sources are
//! the crate's `vendor/pvllm` (a packaged crate; `vendor.sh` fills it) or
//! the checkout the crate sits in (a path or git dependency).
//!
//! pkg-config and cmake are run as commands rather than through crates so
//! that the SDK needs no third-party crates. `PKG_CONFIG` and `CMAKE` name
//! other binaries.
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

    if env::var_os("CARGO_FEATURE_BUNDLED").is_some() {
        match build_bundled() {
            Ok(dir) => {
                // A link argument would reach only this crate's own targets,
                // so programs find the library through DEP_PVLLM_LIB_DIR
                // (the `lib_dir` metadata `link` emits) or the loader path.
                link(&[dir], &["pvllm".to_string()]);
                return;
            }
            Err(why) => panic!("pvllm-sys (bundled): {}", why),
        }
    }

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

/// Configures, builds and installs libpvllm from source into OUT_DIR;
/// returns the folder holding libpvllm.so.
fn build_bundled() -> Result<String, String> {
    let manifest = env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?;
    let manifest = Path::new(&manifest);
    let vendored = manifest.join("vendor").join("pvllm");
    let source = if vendored.join("CMakeLists.txt").exists() {
        vendored
    } else {
        let checkout = manifest.join("..").join("..").join("..");
        if !checkout
            .join("capi")
            .join("include")
            .join("pvllm")
            .join("pvllm.h")
            .exists()
        {
            return Err(format!(
                "no sources: neither {} nor a pvllm checkout around {}",
                vendored.display(),
                manifest.display()
            ));
        }
        checkout
    };
    println!(
        "cargo:rerun-if-changed={}",
        source.join("CMakeLists.txt").display()
    );
    let out = std::path::PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let build = out.join("pvllm-build");
    let prefix = out.join("pvllm-install");
    let cmake = env::var("CMAKE").unwrap_or_else(|_| "cmake".to_string());
    let jobs = env::var("NUM_JOBS").unwrap_or_else(|_| "2".to_string());
    let run = |args: &[&str]| -> Result<(), String> {
        let status = Command::new(&cmake)
            .args(args)
            .status()
            .map_err(|e| format!("cannot run {}: {}", cmake, e))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("{} {} failed ({})", cmake, args.join(" "), status))
        }
    };
    let src = source.display().to_string();
    let bld = build.display().to_string();
    let install_prefix = format!("-DCMAKE_INSTALL_PREFIX={}", prefix.display());
    run(&[
        "-S",
        &src,
        "-B",
        &bld,
        "-DCMAKE_BUILD_TYPE=Release",
        "-DCMAKE_INSTALL_LIBDIR=lib",
        &install_prefix,
        "-DPVLLM_BUILD_TESTS=OFF",
        "-DPVLLM_BUILD_TOOLS=OFF",
        "-DPVLLM_BUILD_BENCH=OFF",
        "-DPVLLM_CUDA=OFF",
    ])?;
    run(&["--build", &bld, "--parallel", &jobs])?;
    // Every component: the runtime's libpvllm.so.1 and the dev
    // component's libpvllm.so the linker looks for.
    run(&["--install", &bld])?;
    Ok(prefix.join("lib").display().to_string())
}
