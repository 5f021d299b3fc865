#!/usr/bin/env python3
"""Builds and runs a library user's program against an installed turnstile.

    run_consumers.py --build-dir B --consumers-dir D --meson M --cxx C...

1. `meson install --destdir` of build dir B into a staging directory.
2. The installed shared libraries carry their soversion (SONAME
   libturnstile.so.0), and every library they are linked against that is
   not the C/C++ runtime appears in `pkg-config --static --libs` of their
   pkg-config file: a .pc file that forgot a dependency fails here.
3. D/cmake (find_package(turnstile CONFIG REQUIRED), turnstile::turnstile
   and turnstile::sim) is configured and built with CMake, and
   D/consumer.cpp is compiled with the flags `pkg-config --cflags --libs
   turnstile-sim` gives: both against the staging prefix only.
4. Both programs run against a real redis-server, started on a free
   loopback port and stopped by its PID, with the staged libraries (ldd
   must resolve libturnstile there, not elsewhere on the machine).

Prints what it does; exits 1 naming the first step that failed.
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

# The C and C++ runtime and the dynamic loader: linked by every program,
# listed by no .pc file.
RUNTIME_LIBRARIES = {"c", "m", "stdc++", "gcc_s", "pthread", "dl", "rt"}
# How long redis-server may take to answer PING after it was started.
REDIS_START_TIMEOUT_S = 30
# Any one step (a CMake build on a loaded machine included).
STEP_TIMEOUT_S = 300


class Failure(Exception):
    pass


def run(argv, env=None, cwd=None):
    print("+ " + " ".join(argv), flush=True)
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=STEP_TIMEOUT_S)
    if done.stdout:
        print(done.stdout, end="" if done.stdout.endswith("\n") else "\n", flush=True)
    if done.returncode != 0:
        raise Failure(f"{argv[0]} exited {done.returncode}")
    return done.stdout


def build_options(meson, build_dir):
    options = json.loads(run(meson + ["introspect", build_dir, "--buildoptions"]))
    return {option["name"]: option["value"] for option in options}


def needed_libraries(path):
    dynamic = run(["readelf", "-d", path])
    return re.findall(r"\(NEEDED\)\s+Shared library: \[lib([^\]]+?)\.so[.0-9]*\]", dynamic), \
        re.findall(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dynamic)


def check_library(libdir, env, file_name, package, soname):
    path = os.path.join(libdir, file_name)
    if not os.path.exists(path):
        raise Failure(f"{path} was not installed")
    needed, sonames = needed_libraries(path)
    if sonames != [soname]:
        raise Failure(f"{file_name} has SONAME {sonames}, expected {soname}")
    if not os.path.islink(os.path.join(libdir, soname)):
        raise Failure(f"{soname} (the soversion link) was not installed")
    listed = set(re.findall(r"-l(\S+)", run(["pkg-config", "--static", "--libs", package], env=env)))
    missing = [name for name in needed if name not in RUNTIME_LIBRARIES and name not in listed]
    if missing:
        raise Failure(f"{file_name} links {missing} but {package}.pc does not list them")
    print(f"{file_name}: SONAME {soname}; links {sorted(needed)}, all in {package}.pc", flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_redis(port, server):
    deadline = time.monotonic() + REDIS_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise Failure(f"redis-server exited {server.returncode} at start")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
                connection.sendall(b"PING\r\n")
                if connection.recv(64).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise Failure(f"redis-server on port {port} did not answer PING in {REDIS_START_TIMEOUT_S} s")


def run_consumer(program, libdir, url):
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    resolved = run(["ldd", program], env=env)
    line = next((l for l in resolved.splitlines() if "libturnstile.so" in l), "")
    if libdir not in line:
        raise Failure(f"{program} resolves libturnstile outside the staging prefix: {line.strip()!r}")
    output = run([program, url], env=env)
    if output.count(": kept out while held: yes, got in after: yes") != 2:
        raise Failure(f"{program} printed something else than two successes")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--consumers-dir", required=True)
    parser.add_argument("--meson", nargs="+", required=True)
    parser.add_argument("--cxx", nargs="+", required=True)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="turnstile-consumers-")
    server = None
    try:
        stage = os.path.join(work, "stage")
        run(args.meson + ["install", "-C", args.build_dir, "--no-rebuild", "--quiet", "--destdir", stage])
        options = build_options(args.meson, args.build_dir)
        prefix = stage + options["prefix"]
        libdir = os.path.join(prefix, options["libdir"])
        # The .pc files are relocatable (pkgconfig.relocatable): their prefix
        # is where they are found, as for a package unpacked anywhere.
        pc_env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
        check_library(libdir, pc_env, "libturnstile.so", "turnstile", "libturnstile.so.0")
        check_library(libdir, pc_env, "libturnstile_sim.so", "turnstile-sim", "libturnstile_sim.so.0")

        cmake_build = os.path.join(work, "cmake-build")
        # Meson's compiler may come with a launcher (`ccache c++`): CMake
        # takes the launcher apart from the compiler.
        compiler = ["-DCMAKE_CXX_COMPILER=" + args.cxx[-1]]
        if len(args.cxx) > 1:
            compiler.append("-DCMAKE_CXX_COMPILER_LAUNCHER=" + ";".join(args.cxx[:-1]))
        run(["cmake", "-S", os.path.join(args.consumers_dir, "cmake"), "-B", cmake_build,
             "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_BUILD_TYPE=Release"] + compiler +
            ["-DCMAKE_FIND_PACKAGE_NO_SYSTEM_PACKAGE_REGISTRY=ON"])
        run(["cmake", "--build", cmake_build])
        cmake_program = os.path.join(cmake_build, "consumer")

        flags = run(["pkg-config", "--cflags", "--libs", "turnstile-sim"], env=pc_env).split()
        if not any(flag.startswith("-I" + prefix) for flag in flags):
            raise Failure(f"pkg-config's flags do not point into the staging prefix: {flags}")
        pkg_config_program = os.path.join(work, "pkg-config-consumer")
        run(args.cxx + ["-std=c++20", os.path.join(args.consumers_dir, "consumer.cpp"), "-o", pkg_config_program]
            + flags)

        port = free_port()
        server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                   "--appendonly", "no", "--dir", work],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_redis(port, server)
        url = f"redis://127.0.0.1:{port}"
        run_consumer(cmake_program, libdir, url)
        run_consumer(pkg_config_program, libdir, url)
        print("both consumers built and ran against the installed turnstile", flush=True)
        return 0
    except (Failure, subprocess.TimeoutExpired) as failure:
        print(f"run_consumers: {failure}", file=sys.stderr, flush=True)
        return 1
    finally:
        if server is not None:
            server.kill()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
