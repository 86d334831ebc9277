using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>
    /// Engine.ApplyChatTemplate on a copy of the tiny model with the template
    /// of tests/data/chat_template_tiny; the expected texts are those of
    /// tests/data/chat_goldens/tiny.json (rendered by @huggingface/jinja).
    /// Since 0.9: ChatTemplateOptions.ChatTemplate and Engine.ChatRequest.
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

        // Neither the model's template nor the tiny one above: <role>content.
        private const string Override =
            "{{ bos_token }}|{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}" +
            "{% if add_generation_prompt %}<assistant>{% endif %}";

        [Test]
        public void ChatTemplateOptionReplacesTheModelsTemplate()
        {
            using (Engine engine = CreateEngine())
            {
                var o = new ChatTemplateOptions { ChatTemplate = Override };
                // bos_token still comes from the model's tokenizer_config.json.
                Assert.AreEqual("<s>|<user>Hello!<assistant>", engine.ApplyChatTemplate(Hello, o));
                o.AddGenerationPrompt = false;
                Assert.AreEqual("<s>|<user>Hello!", engine.ApplyChatTemplate(Hello, o));
                // TemplateName is ignored: this model has no "tool_use" (NotFound without the override).
                o.TemplateName = "tool_use";
                Assert.AreEqual("<s>|<user>Hello!", engine.ApplyChatTemplate(Hello, o));
                // The override's own checks: the model's raise_exception is not reached.
                Assert.AreEqual("<s>|<robot>beep<assistant>", engine.ApplyChatTemplate(
                    "[{\"role\": \"robot\", \"content\": \"beep\"}]", new ChatTemplateOptions { ChatTemplate = Override }));

                var e = Assert.Throws<PvllmException>(
                    () => engine.ApplyChatTemplate(Hello, new ChatTemplateOptions { ChatTemplate = "" }));
                Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status, e.Message);
                e = Assert.Throws<PvllmException>(
                    () => engine.ApplyChatTemplate(Hello, new ChatTemplateOptions { ChatTemplate = "a\0{{ b }}" }));
                Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status, e.Message);
                Assert.AreEqual("the chat template contains a NUL character", e.Message);
                Assert.IsNull(new ChatTemplateOptions().ChatTemplate, "the model's by default");
            }
            using (Engine plain = TinyModel.CreateEngine())
            {
                // A model that ships no template renders the one given.
                StringAssert.EndsWith("|<user>Hello!<assistant>",
                    plain.ApplyChatTemplate(Hello, new ChatTemplateOptions { ChatTemplate = Override }));
            }
        }

        [Test]
        public void ChatRequestSubmitsTheRenderedTextWithoutAnotherBos()
        {
            using (Engine engine = CreateEngine())
            {
                string rendered = engine.ApplyChatTemplate(Hello);
                int[] expected = engine.Tokenize(rendered);
                int bos = ModelInfo.Inspect(dir).BosTokenId;
                Assert.AreEqual(bos, expected[0], "the template's <s> is the BOS token");
                Assert.AreEqual(1, expected.Count(t => t == bos));

                Request chat = engine.ChatRequest(Hello, V09Tests.WithPromptLogprobs());
                Assert.AreEqual(rendered, chat.PromptText);
                Assert.IsFalse(chat.AddSpecialTokens);
                V09Tests.AssertPromptWas(expected, engine.Generate(chat), "ChatRequest");
                // Options reach the template.
                Assert.AreEqual(engine.ApplyChatTemplate(Hello, new ChatTemplateOptions { ChatTemplate = Override }),
                    engine.ChatRequest(Hello, null, new ChatTemplateOptions { ChatTemplate = Override }).PromptText);

                ulong id = engine.SubmitChat(Hello, V09Tests.WithPromptLogprobs());
                var outputs = new List<Output>();
                for (int step = 0; !outputs.Any(o => o.RequestFinished); step++)
                {
                    Assert.Less(step, 1000, "the request never finished");
                    engine.Step();
                    outputs.AddRange(engine.Poll().Where(o => o.RequestId == id));
                }
                Assert.AreEqual(expected.Length, outputs.Last().Metrics.NumPromptTokens, "SubmitChat");

                // Errors are ApplyChatTemplate's, and nothing is queued.
                var e = Assert.Throws<PvllmException>(
                    () => engine.SubmitChat("[{\"role\": \"robot\", \"content\": \"beep\"}]"));
                Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status);
                Assert.AreEqual(0, engine.Step());
            }
        }
    }
}
