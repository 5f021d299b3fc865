#!/usr/bin/env python3
"""Builds and runs a library user's program against an installed turnstile.

    run_consumers.py --build-dir B --consumers-dir D --meson M --cxx C...

1. `meson install --destdir` of build dir B into a staging directory.
2. The installed shared libraries carry their soversion (SONAME
   libturnstile.so.0), and every library they are linked against that is
   not the C/C++ runtime appears in `pkg-config --static --libs` of their
   pkg-config file: a .pc file that forgot a dependency fails here.
3. No flag leaks: with turnstile's own .pc files and no other
   (PKG_CONFIG_LIBDIR is the staged pkgconfig directory alone),
   `pkg-config --cflags --libs` of turnstile and of turnstile-sim succeeds
   and gives only -I/-L into the staging prefix, -lturnstile[_sim] and
   -pthread: no .pc file of a private dependency (hiredis, tomlplusplus,
   openssl, lua5.1, libcrypto) is needed, none of their flags
   (-I/usr/include/hiredis, -DTOML_SHARED_LIB=1, ...) is passed on.
4. D/cmake (find_package(turnstile CONFIG REQUIRED), turnstile::turnstile
   and turnstile::sim) is configured and built with CMake, its compile
   command for consumer.cpp holding no include directory outside the
   staging prefix and no definition but CMake's NDEBUG; D/consumer.cpp is
   compiled with the flags of step 3: both against the staging prefix
   only.
5. The installed `turnstile --version` prints the project version, and
   `turnstile sim --list` finds turnstile-sim in <libexecdir>/turnstile of
   the staging prefix (cli/sim_dispatch.h: relative to the program).
6. Both programs run against a real redis-server, started on a free
   loopback port and stopped by its PID, with the staged libraries (ldd
   must resolve libturnstile there, not elsewhere on the machine); each
   checks that the installed turnstile/version.h and the library agree.

Prints what it does; exits 1 naming the first step that failed.
"""

import argparse
import contextlib
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
# What turnstile's .pc files may give besides -I/-L into its own prefix.
OWN_LINK_FLAGS = {"-lturnstile", "-lturnstile_sim", "-pthread"}
# What CMake itself adds to a Release compile.
CMAKE_OWN_DEFINITIONS = {"-DNDEBUG"}
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
    def introspect(what):
        return json.loads(subprocess.run(meson + ["introspect", build_dir, what], check=True, text=True,
                                         stdout=subprocess.PIPE, timeout=STEP_TIMEOUT_S).stdout)

    values = {option["name"]: option["value"] for option in introspect("--buildoptions")}
    values["version"] = introspect("--projectinfo")["version"]
    return values


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


def own_flags(package, pkgconfig_dir, prefix):
    """`pkg-config --cflags --libs package` with turnstile's .pc files alone;
    fails naming any flag that is not turnstile's own."""
    env = dict(os.environ, PKG_CONFIG_LIBDIR=pkgconfig_dir)
    env.pop("PKG_CONFIG_PATH", None)
    flags = run(["pkg-config", "--cflags", "--libs", package], env=env).split()
    leaked = [flag for flag in flags
              if not (flag.startswith(("-I" + prefix, "-L" + prefix)) or flag in OWN_LINK_FLAGS)]
    if leaked:
        raise Failure(f"{package}.pc passes on flags of its private dependencies: {leaked}")
    if not any(flag.startswith("-I" + prefix) for flag in flags):
        raise Failure(f"pkg-config's flags for {package} do not point into the staging prefix: {flags}")
    print(f"{package}.pc: needs no other .pc file, passes on nothing foreign: {' '.join(flags)}", flush=True)
    return flags


def check_cmake_compile_command(build_dir, prefix):
    """The consumer's compile command holds turnstile's include directory
    and nothing of a private dependency."""
    with open(os.path.join(build_dir, "compile_commands.json"), encoding="utf-8") as commands_file:
        commands = json.load(commands_file)
    command = next((entry["command"] for entry in commands if entry["file"].endswith("consumer.cpp")), None)
    if command is None:
        raise Failure("CMake wrote no compile command for consumer.cpp")
    words = command.split()
    leaked = []
    for index, word in enumerate(words):
        if word in ("-I", "-isystem") and index + 1 < len(words):
            word = word + words[index + 1]
        for option in ("-I", "-isystem"):
            if word.startswith(option) and len(word) > len(option):
                directory = word[len(option):]
                if not os.path.realpath(directory).startswith(os.path.realpath(prefix)):
                    leaked.append(word)
        if word.startswith("-D") and word not in CMAKE_OWN_DEFINITIONS:
            leaked.append(word)
    if leaked:
        raise Failure(f"turnstile's CMake package passes on flags of its private dependencies: {leaked}")
    print("CMake consumer: compiled with turnstile's include directory and nothing foreign", flush=True)


def check_installed_cli(prefix, options, libdir):
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    env.pop("TURNSTILE_EXEC_PATH", None)
    program = os.path.join(prefix, options["bindir"], "turnstile")
    version = run([program, "--version"], env=env).strip()
    if version != "turnstile " + options["version"]:
        raise Failure(f"turnstile --version printed {version!r}, expected 'turnstile {options['version']}'")
    scenarios = run([program, "sim", "--list"], env=env)
    if "contention" not in scenarios:
        raise Failure("the installed turnstile sim --list names no contention scenario")
    print(f"installed CLI: {version}; turnstile sim runs the installed turnstile-sim", flush=True)


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


@contextlib.contextmanager
def redis_server(work):
    """A redis-server on a free loopback port, its files in `work`; yields
    its URL, and kills it (by its PID) on the way out."""
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", work],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_redis(port, server)
        yield f"redis://127.0.0.1:{port}"
    finally:
        server.kill()
        server.wait()


def run_consumer(program, libdir, url):
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    resolved = run(["ldd", program], env=env)
    line = next((l for l in resolved.splitlines() if "libturnstile.so" in l), "")
    if libdir not in line:
        raise Failure(f"{program} resolves libturnstile outside the staging prefix: {line.strip()!r}")
    output = run([program, url], env=env)
    if "version: headers " not in output:
        raise Failure(f"{program} printed no version line")
    if output.count(": kept out while held: yes, got in after: yes") != 2:
        raise Failure(f"{program} printed something else than two successes")


def in_scratch(prefix, tool, body):
    """body(work) in a fresh directory `work`, removed afterwards; a Failure
    or a step's timeout is printed as one line of `tool` and exits 1."""
    work = tempfile.mkdtemp(prefix=prefix)
    try:
        return body(work)
    except (Failure, subprocess.TimeoutExpired) as failure:
        print(f"{tool}: {failure}", file=sys.stderr, flush=True)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check_consumers(args, work):
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

    check_installed_cli(prefix, options, libdir)
    pkgconfig_dir = os.path.join(libdir, "pkgconfig")
    own_flags("turnstile", pkgconfig_dir, prefix)
    flags = own_flags("turnstile-sim", pkgconfig_dir, prefix)

    cmake_build = os.path.join(work, "cmake-build")
    # Meson's compiler may come with a launcher (`ccache c++`): CMake
    # takes the launcher apart from the compiler.
    compiler = ["-DCMAKE_CXX_COMPILER=" + args.cxx[-1]]
    if len(args.cxx) > 1:
        compiler.append("-DCMAKE_CXX_COMPILER_LAUNCHER=" + ";".join(args.cxx[:-1]))
    run(["cmake", "-S", os.path.join(args.consumers_dir, "cmake"), "-B", cmake_build,
         "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_BUILD_TYPE=Release"] + compiler +
        ["-DCMAKE_FIND_PACKAGE_NO_SYSTEM_PACKAGE_REGISTRY=ON", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"])
    check_cmake_compile_command(cmake_build, prefix)
    run(["cmake", "--build", cmake_build])
    cmake_program = os.path.join(cmake_build, "consumer")

    pkg_config_program = os.path.join(work, "pkg-config-consumer")
    run(args.cxx + ["-std=c++20", os.path.join(args.consumers_dir, "consumer.cpp"), "-o", pkg_config_program]
        + flags)

    with redis_server(work) as url:
        run_consumer(cmake_program, libdir, url)
        run_consumer(pkg_config_program, libdir, url)
    print("both consumers built and ran against the installed turnstile", flush=True)
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--consumers-dir", required=True)
    parser.add_argument("--meson", nargs="+", required=True)
    parser.add_argument("--cxx", nargs="+", required=True)
    args = parser.parse_args()
    return in_scratch("turnstile-consumers-", "run_consumers", lambda work: check_consumers(args, work))


if __name__ == "__main__":
    sys.exit(main())
