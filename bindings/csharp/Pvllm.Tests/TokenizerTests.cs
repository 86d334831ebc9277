using System;
using System.IO;
using System.Linq;
using System.Threading.Tasks;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>
    /// Tokenizer (pvllm_tokenizer, since 0.9): a model's tokenizer and chat
    /// templates without its weights, giving what an engine over the same
    /// path gives.
    /// </summary>
    [TestFixture]
    public class TokenizerTests
    {
        private const string Hello = "[{\"role\": \"user\", \"content\": \"Hello!\"}]";

        private static readonly string[] Texts =
        {
            "Hello world", "café 你好", " leading space", "",
            string.Concat(Enumerable.Repeat("héllo wörld ", 200)), // past the first buffers
        };

        /// <summary>tests/data/chat_template_tiny: a tokenizer_config.json with a chat template and no tokenizer.</summary>
        private static string ChatTemplateOnly()
            => Path.GetFullPath(Path.Combine(AppDomain.CurrentDomain.BaseDirectory, "..", "..", "..",
                                             "tests", "data", "chat_template_tiny"));

        private static PvllmException ThrowsPvllm(PvllmStatus status, TestDelegate call)
        {
            var e = Assert.Throws<PvllmException>(call);
            Assert.AreEqual(status, e.Status, e.ToString());
            Assert.IsNotEmpty(e.Message);
            return e;
        }

        [Test]
        public void InfoDescribesTheModelsTokenizer()
        {
            ModelInfo model = ModelInfo.Inspect(TinyModel.Path);
            using (Tokenizer tokenizer = Tokenizer.Open(TinyModel.Path))
            {
                TokenizerInfo info = tokenizer.Info;
                Assert.AreEqual("sentencepiece", info.Kind);
                Assert.AreEqual(Path.Combine(TinyModel.Path, "tokenizer.model"), info.Source);
                Assert.AreEqual(model.VocabSize, info.VocabSize);
                Assert.AreEqual(model.BosTokenId, info.BosId);
                Assert.AreEqual(model.EosTokenId, info.EosId);
                Assert.AreEqual("<s>", info.BosToken);
                Assert.AreEqual("</s>", info.EosToken);
                Assert.IsTrue(info.AddsBos);
                Assert.IsFalse(info.HasChatTemplate);
                Assert.IsFalse(tokenizer.IsDisposed);
            }
        }

        [Test]
        public void EncodesAndDecodesAsTheEngine()
        {
            using (Tokenizer tokenizer = Tokenizer.Open(TinyModel.Path))
            using (Engine engine = TinyModel.CreateEngine())
            {
                foreach (string text in Texts)
                {
                    int[] ids = tokenizer.Encode(text);
                    CollectionAssert.AreEqual(engine.Tokenize(text), ids, text);
                    int[] withBos = tokenizer.Encode(text, addSpecialTokens: true);
                    CollectionAssert.AreEqual(engine.Tokenize(text, addBos: true), withBos, text);
                    Assert.AreEqual(tokenizer.Info.BosId, withBos[0], text);
                    CollectionAssert.AreEqual(ids, withBos.Skip(1).ToArray(), text);
                    Assert.AreEqual(engine.Detokenize(ids), tokenizer.Decode(ids), text);
                }
                Assert.IsEmpty(tokenizer.Encode(""));
                Assert.AreEqual("", tokenizer.Decode(new int[0]));
                Assert.AreEqual("café 你好", tokenizer.Decode(tokenizer.Encode("café 你好")));
            }
        }

        [Test]
        public void APvllmFileCarriesTheSameTokenizer()
        {
            using (Tokenizer folder = Tokenizer.Open(TinyModel.Path))
            using (Tokenizer file = Tokenizer.Open(TinyModel.PvllmPath))
            {
                Assert.AreEqual(TinyModel.PvllmPath, file.Info.Source);
                Assert.AreEqual(folder.Info.VocabSize, file.Info.VocabSize);
                foreach (string text in Texts)
                {
                    CollectionAssert.AreEqual(folder.Encode(text, true), file.Encode(text, true), text);
                }
            }
        }

        [Test]
        public void RendersChatTemplatesAsTheEngine()
        {
            string templates = ChatTemplateOnly();
            string dir = Path.Combine(Path.GetTempPath(), "pvllm-cs-tok-" + Guid.NewGuid().ToString("N"));
            try
            {
                Directory.CreateDirectory(dir);
                foreach (string file in Directory.GetFiles(TinyModel.Path))
                {
                    File.Copy(file, Path.Combine(dir, Path.GetFileName(file)));
                }
                File.Copy(Path.Combine(templates, "tokenizer_config.json"), Path.Combine(dir, "tokenizer_config.json"));
                using (Tokenizer tokenizer = Tokenizer.Open(dir))
                using (Engine engine = Engine.Create(new EngineOptions(dir) { KvCacheBytes = 8L << 20, NumThreads = 1 }))
                {
                    Assert.IsTrue(tokenizer.Info.HasChatTemplate);
                    Assert.AreEqual("<s>[USER] Hello!\n[BOT]", tokenizer.ApplyChatTemplate(Hello));
                    var options = new ChatTemplateOptions { AddGenerationPrompt = false };
                    Assert.AreEqual(engine.ApplyChatTemplate(Hello, options), tokenizer.ApplyChatTemplate(Hello, options));
                    options.ChatTemplate = "{{ bos_token }}{{ messages[0]['content'] }}";
                    Assert.AreEqual("<s>Hello!", tokenizer.ApplyChatTemplate(Hello, options));
                    var e = ThrowsPvllm(PvllmStatus.InvalidArgument,
                        () => tokenizer.ApplyChatTemplate("[{\"role\": \"robot\", \"content\": \"beep\"}]"));
                    Assert.AreEqual("unknown role: robot", e.Message);
                }
            }
            finally
            {
                if (Directory.Exists(dir)) Directory.Delete(dir, true);
            }
            using (Tokenizer plain = Tokenizer.Open(TinyModel.Path))
            {
                ThrowsPvllm(PvllmStatus.NotFound, () => plain.ApplyChatTemplate(Hello));
            }
        }

        [Test]
        public void AFolderOfChatTemplatesAloneRendersButDoesNotEncode()
        {
            using (Tokenizer templates = Tokenizer.Open(ChatTemplateOnly()))
            {
                Assert.IsTrue(templates.Info.HasChatTemplate);
                Assert.AreEqual("", templates.Info.Kind);
                Assert.AreEqual("", templates.Info.Source);
                Assert.AreEqual("<s>", templates.Info.BosToken);
                Assert.AreEqual("<s>[USER] Hello!\n[BOT]", templates.ApplyChatTemplate(Hello));
                ThrowsPvllm(PvllmStatus.TokenizerError, () => templates.Encode("Hello"));
                ThrowsPvllm(PvllmStatus.TokenizerError, () => templates.Decode(new[] { 1 }));
            }
        }

        [Test]
        public void BadPathsCarryTheirStatus()
        {
            string missing = Path.Combine(Path.GetTempPath(), "pvllm-no-such-model-" + Guid.NewGuid().ToString("N"));
            PvllmException e = ThrowsPvllm(PvllmStatus.NotFound, () => Tokenizer.Open(missing));
            StringAssert.Contains(missing, e.Message);
            ThrowsPvllm(PvllmStatus.InvalidArgument, () => Tokenizer.Open(""));
            // C would open the folder before the NUL.
            e = ThrowsPvllm(PvllmStatus.InvalidArgument, () => Tokenizer.Open(TinyModel.Path + "\0/elsewhere"));
            StringAssert.Contains("NUL", e.Message);
            Assert.Throws<ArgumentNullException>(() => Tokenizer.Open(null));
            string empty = Path.Combine(Path.GetTempPath(), "pvllm-cs-empty-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(empty);
            try
            {
                ThrowsPvllm(PvllmStatus.NotFound, () => Tokenizer.Open(empty));
            }
            finally
            {
                Directory.Delete(empty);
            }
        }

        [Test]
        public void BadInputsCarryTheirStatus()
        {
            using (Tokenizer tokenizer = Tokenizer.Open(TinyModel.Path))
            {
                ThrowsPvllm(PvllmStatus.InvalidArgument, () => tokenizer.Decode(new[] { 1 << 20 }));
                PvllmException e = ThrowsPvllm(PvllmStatus.InvalidArgument, () => tokenizer.Encode("a\0b"));
                Assert.AreEqual("the text contains a NUL character", e.Message);
                Assert.Throws<ArgumentNullException>(() => tokenizer.Encode(null));
                Assert.Throws<ArgumentNullException>(() => tokenizer.Decode(null));
                Assert.Throws<ArgumentNullException>(() => tokenizer.ApplyChatTemplate(null));
            }
        }

        [Test]
        public void SeveralThreadsShareOneTokenizer()
        {
            using (Tokenizer tokenizer = Tokenizer.Open(TinyModel.Path))
            {
                int[] expected = tokenizer.Encode(Texts[4], true);
                Task<int[]>[] runs = Enumerable.Range(0, 4)
                    .Select(_ => Task.Run(() => tokenizer.Encode(Texts[4], true)))
                    .ToArray();
                foreach (Task<int[]> run in runs) CollectionAssert.AreEqual(expected, run.Result);
            }
        }

        [Test]
        public void DisposeTwiceIsSafeAndUseAfterDisposeThrows()
        {
            Tokenizer tokenizer = Tokenizer.Open(TinyModel.Path);
            tokenizer.Dispose();
            tokenizer.Dispose();
            Assert.IsTrue(tokenizer.IsDisposed);
            Assert.Throws<ObjectDisposedException>(() => tokenizer.Encode("hi"));
            Assert.Throws<ObjectDisposedException>(() => tokenizer.Decode(new[] { 1 }));
            Assert.Throws<ObjectDisposedException>(() => tokenizer.ApplyChatTemplate(Hello));
            Assert.AreEqual("sentencepiece", tokenizer.Info.Kind, "Info was copied at Open");
        }
    }
}
