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
            string maker = Environment.GetEnvironmentVariable("PVLLM_MAKE_TINY_MODEL");
            if (string.IsNullOrEmpty(maker))
            {
                Assert.Fail("PVLLM_MAKE_TINY_MODEL is not set (bindings/csharp/test.sh expects scripts/test.sh's environment)");
            }
            tempDir = System.IO.Path.Combine(System.IO.Path.GetTempPath(), "pvllm-cs-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(tempDir);
            string dir = System.IO.Path.Combine(tempDir, "tiny");
            string pvllmFile = System.IO.Path.Combine(tempDir, "tiny.pvllm");
            var info = new ProcessStartInfo(maker, "\"" + dir + "\" --pvllm \"" + pvllmFile + "\"")
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
            return dir;
        }
    }

    [SetUpFixture]
    public class TestRun
    {
        [TearDown]
        public void RemoveTinyModel() => TinyModel.Cleanup();
    }
}
