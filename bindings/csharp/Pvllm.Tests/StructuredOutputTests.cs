using System;
using System.IO;
using System.Json;
using System.Linq;
using System.Text.RegularExpressions;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>
    /// Structured output (since 0.6) through SamplingParams.Constraint, on the
    /// trained stories260K checkpoint this repository carries: JSON that parses
    /// with the schema's keys, a choice, a regex and a grammar match, each
    /// ending with FinishReason.Stop; bad constraints refused at submit with
    /// the library's status and where it went wrong.
    /// </summary>
    [TestFixture]
    public class StructuredOutputTests
    {
        private const string Prompt = "Once upon a time";

        private const string Schema = @"{
  ""type"": ""object"",
  ""properties"": {
    ""name"": {""type"": ""string"", ""maxLength"": 8},
    ""age"": {""type"": ""integer""}
  },
  ""required"": [""name"", ""age""],
  ""additionalProperties"": false
}";

        private Engine engine;

        /// <summary>models/stories260K/stories260K.bin above the test assembly, else under $PVLLM_SHARED_DIR.</summary>
        private static string Stories260K()
        {
            const string relative = "models/stories260K/stories260K.bin";
            string dir = Path.GetDirectoryName(typeof(StructuredOutputTests).Assembly.Location);
            for (; dir != null; dir = Path.GetDirectoryName(dir))
            {
                string candidate = Path.Combine(dir, relative);
                if (File.Exists(candidate)) return candidate;
            }
            string shared = Environment.GetEnvironmentVariable("PVLLM_SHARED_DIR");
            if (!string.IsNullOrEmpty(shared) && File.Exists(Path.Combine(shared, relative)))
            {
                return Path.Combine(shared, relative);
            }
            Assert.Fail(relative + " is neither above the test assembly nor under $PVLLM_SHARED_DIR");
            return null;
        }

        [SetUp]
        public void CreateEngine()
            => engine = Engine.Create(new EngineOptions(Stories260K()) { KvCacheBytes = 16L << 20, NumThreads = 1 });

        [TearDown]
        public void DisposeEngine() => engine?.Dispose();

        private static SamplingParams Constrained(Constraint constraint, float temperature, ulong seed)
            => new SamplingParams { Temperature = temperature, Seed = seed, MaxTokens = 200, Constraint = constraint };

        [TestCase(0f, 0UL)]
        [TestCase(1f, 1UL)]
        [TestCase(1f, 2UL)]
        [TestCase(1f, 3UL)]
        public void JsonSchemaOutputParsesWithTheSchemasKeys(float temperature, ulong seed)
        {
            Generation g = engine.Generate(new Request(Prompt, Constrained(Constraint.JsonSchema(Schema), temperature, seed)));
            string text = g.Text;
            Assert.AreEqual(FinishReason.Stop, g.Samples[0].FinishReason, text);
            JsonValue doc = JsonValue.Parse(text);
            Assert.AreEqual(JsonType.Object, doc.JsonType, text);
            var obj = (JsonObject)doc;
            CollectionAssert.AreEquivalent(new[] { "age", "name" }, obj.Keys.ToList(), text);
            Assert.AreEqual(JsonType.String, obj["name"].JsonType, text);
            Assert.LessOrEqual(((string)obj["name"]).Length, 8, text);
            Assert.AreEqual(JsonType.Number, obj["age"].JsonType, text);
            // An integer as written: no fraction, no exponent.
            StringAssert.IsMatch("\"age\":-?[0-9]+[,}]", text);
            // Compact: the library writes no whitespace between tokens.
            StringAssert.DoesNotContain("\": ", text);
        }

        [Test]
        public void WithoutAConstraintTheSamePromptIsNoJson()
        {
            // The test above can fail: unconstrained, the model tells a story.
            string text = engine.Generate(new Request(Prompt, SamplingParams.Greedy(40))).Text;
            Assert.Throws(Is.InstanceOf<Exception>(), () => JsonValue.Parse(text), text);
        }

        [Test]
        public void JsonObjectStartsAnObject()
        {
            Generation g = engine.Generate(new Request(Prompt, Constrained(Constraint.JsonObject(), 0f, 0)));
            StringAssert.StartsWith("{", g.Text);
            if (g.Samples[0].FinishReason == FinishReason.Stop)
            {
                Assert.AreEqual(JsonType.Object, JsonValue.Parse(g.Text).JsonType, g.Text);
            }
            else
            {
                Assert.AreEqual(FinishReason.Length, g.Samples[0].FinishReason, g.Text);
            }
        }

        [Test]
        public void ChoiceGivesOneOfTheChoices()
        {
            string[] choices = { "happy", "sad", "very sleepy" };
            SamplingParams p = Constrained(Constraint.Choice(choices), 1f, 3);
            p.N = 6;
            Generation g = engine.Generate(new Request(Prompt, p));
            Assert.AreEqual(6, g.Samples.Count);
            foreach (Sample s in g.Samples)
            {
                CollectionAssert.Contains(choices, s.Text);
                Assert.AreEqual(FinishReason.Stop, s.FinishReason, s.Text);
            }
        }

        [TestCase(0f, 0UL)]
        [TestCase(1f, 1UL)]
        [TestCase(1f, 2UL)]
        public void RegexOutputMatches(float temperature, ulong seed)
        {
            const string pattern = @"(Tom|Lily) (is|was) [a-z]{2,8}\.";
            Generation g = engine.Generate(new Request(Prompt, Constrained(Constraint.Regex(pattern), temperature, seed)));
            StringAssert.IsMatch("^" + pattern + "$", g.Text);
            Assert.AreEqual(FinishReason.Stop, g.Samples[0].FinishReason, g.Text);
        }

        [Test]
        public void GrammarOutputMatches()
        {
            const string gbnf = "root ::= \"The \" animal \" \" (\"ran\" | \"sat\") \".\"\n"
                              + "animal ::= \"cat\" | \"dog\" | \"big \" animal\n";
            Generation g = engine.Generate(new Request(Prompt, Constrained(Constraint.Grammar(gbnf), 1f, 9)));
            StringAssert.IsMatch(@"^The (big )*(cat|dog) (ran|sat)\.$", g.Text);
            Assert.AreEqual(FinishReason.Stop, g.Samples[0].FinishReason, g.Text);
        }

        private PvllmException Refused(Constraint constraint)
        {
            SamplingParams p = SamplingParams.Greedy(8);
            p.Constraint = constraint;
            return Assert.Throws<PvllmException>(() => engine.Submit(new Request("Hi", p)), constraint.ToString());
        }

        [Test]
        public void MalformedConstraintsAreInvalidArgumentsNamingWhere()
        {
            const string schema = "{\"type\": \"object\",";
            PvllmException e = Refused(Constraint.JsonSchema(schema));
            Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status, e.Message);
            // Where a key should come: the end of the text.
            StringAssert.Contains("byte " + schema.Length, e.Message);

            e = Refused(Constraint.Grammar("root ::= \"a\" ("));
            Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status, e.Message);
            StringAssert.Contains("column", e.Message);

            e = Refused(Constraint.Regex("(ab"));
            Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status, e.Message);
            StringAssert.Contains("offset", e.Message);

            e = Refused(Constraint.Choice());
            Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status, e.Message);
            StringAssert.Contains("empty", e.Message);
        }

        [Test]
        public void UnsupportedKeywordsAreUnsupportedNamingThem()
        {
            PvllmException e = Refused(Constraint.JsonSchema("{\"type\": \"array\", \"uniqueItems\": true}"));
            Assert.AreEqual(PvllmStatus.Unsupported, e.Status, e.Message);
            StringAssert.Contains("\"uniqueItems\"", e.Message);

            // Nor with beam search.
            SamplingParams beam = SamplingParams.Greedy(8);
            beam.BeamWidth = 2;
            beam.Constraint = Constraint.Regex("a+");
            e = Assert.Throws<PvllmException>(() => engine.Submit(new Request("Hi", beam)));
            Assert.AreEqual(PvllmStatus.Unsupported, e.Status, e.Message);
        }

        [Test]
        public void NulCharactersAreRefusedBeforeTheLibrary()
        {
            foreach (Constraint c in new[]
            {
                Constraint.JsonSchema("{\"type\": \0\"object\"}"),
                Constraint.Grammar("root ::= \"a\0\""),
                Constraint.Regex("a\0b"),
                Constraint.Choice("yes", "n\0o"),
            })
            {
                PvllmException e = Refused(c);
                Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status, e.Message);
                StringAssert.Contains("NUL", e.Message);
            }
            Assert.Throws<ArgumentNullException>(() => Constraint.JsonSchema(null));
            Assert.Throws<ArgumentException>(() => Constraint.Choice("a", null));
        }

        /// <summary>Whether JSON text has whitespace between its tokens (outside strings).</summary>
        private static bool HasWhitespace(string json)
        {
            bool inString = false;
            for (int i = 0; i < json.Length; ++i)
            {
                char c = json[i];
                if (inString && c == '\\') ++i;
                else if (c == '"') inString = !inString;
                else if (!inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) return true;
            }
            return false;
        }

        /// <summary>
        /// Seeded samples at temperature 1 under `constraint`: how many have
        /// whitespace between tokens, and how many have a member after the
        /// listed one (its name is free text the model may not close within
        /// MaxTokens, so the comma counts); those that ended with Stop parse.
        /// </summary>
        private (int spaced, int unlisted) JsonSamples(Constraint constraint)
        {
            SamplingParams p = Constrained(constraint, 1f, 11);
            p.MaxTokens = 80;
            p.N = 8;
            int spaced = 0, unlisted = 0;
            foreach (Sample s in engine.Generate(new Request(Prompt, p)).Samples)
            {
                if (s.FinishReason == FinishReason.Stop)
                {
                    Assert.IsInstanceOf<JsonObject>(JsonValue.Parse(s.Text), s.Text);
                }
                if (HasWhitespace(s.Text)) ++spaced;
                if (s.Text.StartsWith("{\"a\":1,", StringComparison.Ordinal)) ++unlisted;
            }
            return (spaced, unlisted);
        }

        [Test]
        public void JsonOptionsAllowWhitespaceAndUnlistedMembers()
        {
            const string schema = "{\"type\": \"object\", \"properties\": {\"a\": {\"const\": 1}}, "
                + "\"required\": [\"a\"], \"additionalProperties\": {\"type\": \"boolean\"}}";
            Assert.AreEqual((0, 0), JsonSamples(Constraint.JsonSchema(schema)), "no options");
            Assert.Greater(JsonSamples(Constraint.JsonSchema(schema, JsonOptions.Whitespace)).spaced, 0, "Whitespace");
            (int spaced, int unlisted) = JsonSamples(Constraint.JsonSchema(schema, JsonOptions.UnlistedProperties));
            Assert.AreEqual(0, spaced, "UnlistedProperties");
            Assert.Greater(unlisted, 0, "UnlistedProperties");
            Assert.Greater(JsonSamples(Constraint.JsonObject(JsonOptions.Whitespace)).spaced, 0, "JsonObject");
        }

        [Test]
        public void AnUnknownJsonOptionIsRefusedByTheLibrary()
        {
            PvllmException e = Refused(Constraint.JsonObject((JsonOptions)8));
            Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status, e.Message);
            StringAssert.Contains("constraint_flags", e.Message);
            StringAssert.Contains("0x8", e.Message);
        }

        [Test]
        public void JsonOptionsAreTheirConstraintFlagBits()
        {
            Assert.AreEqual(4, (int)JsonOptions.AnyOrder, "PVLLM_CONSTRAINT_JSON_ANY_ORDER");
            var p = new SamplingParams
            {
                Constraint = Constraint.JsonSchema("{}", JsonOptions.Whitespace | JsonOptions.AnyOrder),
            };
            using (var scope = new NativeScope())
            {
                Assert.AreEqual(1u | 4u, p.ToNative(scope).constraint_flags);
            }
        }

        /// <summary>
        /// AnyOrder is taken by both JSON kinds; whichever order the grammar
        /// lets the members come in, what ends is what the schema allows: both
        /// members, each once, compact.
        /// </summary>
        [Test]
        public void JsonAnyOrderIsTakenByBothJsonKinds()
        {
            const string schema = "{\"type\": \"object\", \"properties\": {\"a\": {\"const\": 1}, "
                + "\"b\": {\"const\": true}}, \"required\": [\"a\", \"b\"], \"additionalProperties\": false}";
            SamplingParams p = Constrained(Constraint.JsonSchema(schema, JsonOptions.AnyOrder), 1f, 11);
            p.MaxTokens = 60;
            p.N = 4;
            int stopped = 0;
            foreach (Sample s in engine.Generate(new Request(Prompt, p)).Samples)
            {
                Assert.IsFalse(HasWhitespace(s.Text), s.Text);
                if (s.FinishReason != FinishReason.Stop) continue;
                ++stopped;
                var doc = (JsonObject)JsonValue.Parse(s.Text);
                Assert.AreEqual(2, doc.Count, s.Text);
                Assert.AreEqual(1, (int)doc["a"], s.Text);
                Assert.AreEqual(true, (bool)doc["b"], s.Text);
            }
            Assert.Greater(stopped, 0, "AnyOrder: no sample ended");
            Assert.AreEqual(0, JsonSamples(Constraint.JsonObject(JsonOptions.AnyOrder)).spaced, "JsonObject");
        }

        [Test]
        public void ConstraintsDescribeThemselves()
        {
            Constraint choice = Constraint.Choice(new[] { "a", "b" }.Where(s => s != null));
            Assert.AreEqual(ConstraintKind.Choice, choice.Kind);
            CollectionAssert.AreEqual(new[] { "a", "b" }, choice.Choices);
            Assert.IsNull(choice.Text);
            Constraint regex = Constraint.Regex("a+");
            Assert.AreEqual(ConstraintKind.Regex, regex.Kind);
            Assert.AreEqual("a+", regex.Text);
            CollectionAssert.IsEmpty(regex.Choices);
            Assert.AreEqual(ConstraintKind.JsonObject, Constraint.JsonObject().Kind);
            Assert.AreEqual(JsonOptions.None, Constraint.JsonObject().JsonOptions);
            Constraint spaced = Constraint.JsonSchema("{}", JsonOptions.Whitespace | JsonOptions.UnlistedProperties);
            Assert.AreEqual(JsonOptions.Whitespace | JsonOptions.UnlistedProperties, spaced.JsonOptions);
            Assert.AreEqual("JsonSchema({}) [Whitespace, UnlistedProperties]", spaced.ToString());
            Assert.AreEqual("JsonObject [AnyOrder]", Constraint.JsonObject(JsonOptions.AnyOrder).ToString());
            Assert.IsNull(new SamplingParams().Constraint, "none by default");
        }
    }
}
