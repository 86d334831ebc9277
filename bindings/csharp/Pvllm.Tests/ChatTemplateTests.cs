using System;
using System.IO;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>
    /// Engine.ApplyChatTemplate on a copy of the tiny model with the template
    /// of tests/data/chat_template_tiny; the expected texts are those of
    /// tests/data/chat_goldens/tiny.json (rendered by @huggingface/jinja).
    /// </summary>
    [TestFixture]
    public class ChatTemplateTests
    {
        private const string Hello = "[{\"role\": \"user\", \"content\": \"Hello!\"}]";
        private string dir;

        [TestFixtureSetUp]
        public void MakeModelWithTemplate()
        {
            dir = Path.Combine(Path.GetTempPath(), "pvllm-cs-chat-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(dir);
            foreach (string file in Directory.GetFiles(TinyModel.Path))
            {
                File.Copy(file, Path.Combine(dir, Path.GetFileName(file)));
            }
            string data = Path.GetFullPath(Path.Combine(AppDomain.CurrentDomain.BaseDirectory, "..", "..", "..",
                "tests", "data", "chat_template_tiny", "tokenizer_config.json"));
            File.Copy(data, Path.Combine(dir, "tokenizer_config.json"));
        }

        [TestFixtureTearDown]
        public void RemoveModel()
        {
            if (dir != null && Directory.Exists(dir)) Directory.Delete(dir, true);
        }

        private Engine CreateEngine()
        {
            return Engine.Create(new EngineOptions(dir) { KvCacheBytes = 8L << 20, NumThreads = 1 });
        }

        [Test]
        public void RendersTheModelsTemplate()
        {
            using (Engine engine = CreateEngine())
            {
                Assert.AreEqual("<s>[USER] Hello!\n",
                    engine.ApplyChatTemplate(Hello, new ChatTemplateOptions { AddGenerationPrompt = false }));
                Assert.AreEqual("<s>[USER] Hello!\n[BOT]", engine.ApplyChatTemplate(Hello));
                string longText = new string('z', 1000); // past the first buffer
                Assert.AreEqual("<s>[USER] " + longText + "\n[BOT]",
                    engine.ApplyChatTemplate("[{\"role\": \"user\", \"content\": \"" + longText + "\"}]"));
            }
        }

        [Test]
        public void RejectionsCarryTheirStatus()
        {
            using (Engine engine = CreateEngine())
            {
                var e = Assert.Throws<PvllmException>(
                    () => engine.ApplyChatTemplate("[{\"role\": \"robot\", \"content\": \"beep\"}]"));
                Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status);
                Assert.AreEqual("unknown role: robot", e.Message);
                e = Assert.Throws<PvllmException>(() => engine.ApplyChatTemplate("[{"));
                Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status);
                e = Assert.Throws<PvllmException>(
                    () => engine.ApplyChatTemplate(Hello, new ChatTemplateOptions { TemplateName = "tool_use" }));
                Assert.AreEqual(PvllmStatus.NotFound, e.Status);
            }
            using (Engine plain = TinyModel.CreateEngine())
            {
                var e = Assert.Throws<PvllmException>(() => plain.ApplyChatTemplate(Hello));
                Assert.AreEqual(PvllmStatus.NotFound, e.Status);
            }
        }
    }
}
