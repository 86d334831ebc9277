using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Runtime.InteropServices;
using System.Text.RegularExpressions;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>
    /// NativeMethods' structs against the C compiler's view of pvllm.h: test.sh
    /// compiles layout.c and points PVLLM_CSHARP_LAYOUT at its output.
    /// </summary>
    [TestFixture]
    public class LayoutTests
    {
        [Test]
        public void EveryFunctionOfTheHeaderIsDeclared()
        {
            string include = Environment.GetEnvironmentVariable("PVLLM_INCLUDE_DIR");
            string header = string.IsNullOrEmpty(include) ? null : Path.Combine(include, "pvllm", "pvllm.h");
            if (header == null || !File.Exists(header))
            {
                Assert.Ignore("PVLLM_INCLUDE_DIR does not name the folder of pvllm/pvllm.h");
            }
            var declared = new HashSet<string>(typeof(NativeMethods)
                .GetMethods(BindingFlags.Static | BindingFlags.NonPublic)
                .Where(m => (m.Attributes & MethodAttributes.PinvokeImpl) != 0)
                .Select(m => m.Name));
            List<string> functions = Regex.Matches(File.ReadAllText(header), @"PVLLM_API\s+[\w\s\*]*?\b(pvllm_\w+)\s*\(")
                .Cast<Match>().Select(m => m.Groups[1].Value).ToList();
            Assert.Greater(functions.Count, 25);
            CollectionAssert.IsEmpty(functions.Where(f => !declared.Contains(f)).ToList(), "not in NativeMethods");
            CollectionAssert.IsEmpty(declared.Where(f => !functions.Contains(f)).ToList(), "not in pvllm.h");
        }

        [Test]
        public void StructsMatchTheHeaderFieldByField()
        {
            string path = Environment.GetEnvironmentVariable("PVLLM_CSHARP_LAYOUT");
            if (string.IsNullOrEmpty(path) || !File.Exists(path))
            {
                Assert.Ignore("PVLLM_CSHARP_LAYOUT is not set: test.sh found no C compiler to run layout.c");
            }
            var fieldsSeen = new Dictionary<string, HashSet<string>>();
            int checkedLines = 0;
            foreach (string line in File.ReadAllLines(path).Where(l => l.Length > 0))
            {
                string[] parts = line.Split(' ');
                Assert.AreEqual(3, parts.Length, line);
                Type type = typeof(NativeMethods).GetNestedType(parts[0], BindingFlags.NonPublic);
                Assert.IsNotNull(type, "NativeMethods." + parts[0] + " is missing");
                long expected = long.Parse(parts[2]);
                if (parts[1] == "<size>")
                {
                    Assert.AreEqual(expected, Marshal.SizeOf(type), "sizeof(" + parts[0] + ")");
                    fieldsSeen[parts[0]] = new HashSet<string>();
                }
                else
                {
                    Assert.IsNotNull(type.GetField(parts[1]), parts[0] + "." + parts[1] + " is missing");
                    Assert.AreEqual(expected, Marshal.OffsetOf(type, parts[1]).ToInt64(),
                                    "offsetof(" + parts[0] + ", " + parts[1] + ")");
                    fieldsSeen[parts[0]].Add(parts[1]);
                }
                checkedLines++;
            }
            Assert.Greater(checkedLines, 100);
            foreach (KeyValuePair<string, HashSet<string>> s in fieldsSeen)
            {
                Type type = typeof(NativeMethods).GetNestedType(s.Key, BindingFlags.NonPublic);
                foreach (FieldInfo f in type.GetFields(BindingFlags.Instance | BindingFlags.Public))
                {
                    Assert.IsTrue(s.Value.Contains(f.Name), s.Key + "." + f.Name + " is not in the header");
                }
            }
        }
    }
}
