using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Text;

namespace Pvllm
{
    /// <summary>UTF-8 conversions done by hand, whatever the runtime's default charset.</summary>
    internal static class Utf8
    {
        /// <summary>`s` as NUL-terminated UTF-8 bytes (null stays null).</summary>
        internal static byte[] ToNulTerminated(string s)
        {
            if (s == null) return null;
            int length = Encoding.UTF8.GetByteCount(s);
            var bytes = new byte[length + 1];
            Encoding.UTF8.GetBytes(s, 0, s.Length, bytes, 0);
            return bytes;
        }

        /// <summary>A NUL-terminated UTF-8 string owned by the library ("" for NULL).</summary>
        internal static string FromNative(IntPtr p)
        {
            if (p == IntPtr.Zero) return string.Empty;
            int length = 0;
            while (Marshal.ReadByte(p, length) != 0) length++;
            return FromNative(p, length);
        }

        /// <summary>`length` bytes of UTF-8 at `p`.</summary>
        internal static string FromNative(IntPtr p, int length)
        {
            if (p == IntPtr.Zero || length == 0) return string.Empty;
            var bytes = new byte[length];
            Marshal.Copy(p, bytes, 0, length);
            return Encoding.UTF8.GetString(bytes);
        }
    }

    /// <summary>
    /// Unmanaged memory that lives for one native call: UTF-8 strings, int
    /// arrays and structs the C structs point at. The library copies inputs
    /// before returning, so everything is freed right after the call.
    /// </summary>
    /// <summary>A C call that writes text into a buffer (text, capacity, *length, *error).</summary>
    internal delegate PvllmStatus TextCall(byte[] text, UIntPtr capacity, out UIntPtr length, out IntPtr error);

    /// <summary>
    /// Runs a TextCall with room for `guess` bytes, growing once when it
    /// answers BufferTooSmall with the length it needs; throws PvllmException
    /// for any other failure.
    /// </summary>
    internal static class TextBuffer
    {
        internal static string Read(int guess, TextCall call)
        {
            var text = new byte[guess];
            while (true)
            {
                UIntPtr length;
                IntPtr error;
                PvllmStatus status = call(text, (UIntPtr)(uint)text.Length, out length, out error);
                int count = checked((int)length.ToUInt64());
                if (status == PvllmStatus.BufferTooSmall && count + 1 > text.Length)
                {
                    NativeMethods.pvllm_error_free(error);
                    text = new byte[count + 1];
                    continue;
                }
                PvllmException.Check(status, error);
                return System.Text.Encoding.UTF8.GetString(text, 0, count);
            }
        }
    }

    internal sealed class NativeScope : IDisposable
    {
        private readonly List<IntPtr> allocations = new List<IntPtr>();

        /// <summary>A NUL-terminated UTF-8 copy of `s`; NULL for null.</summary>
        public IntPtr Utf8String(string s)
        {
            if (s == null) return IntPtr.Zero;
            byte[] bytes = Utf8.ToNulTerminated(s);
            IntPtr p = Alloc(bytes.Length);
            Marshal.Copy(bytes, 0, p, bytes.Length);
            return p;
        }

        /// <summary>A copy of `values` as int32_t[]; NULL when empty.</summary>
        public IntPtr Int32Array(IList<int> values)
        {
            if (values == null || values.Count == 0) return IntPtr.Zero;
            var copy = new int[values.Count];
            values.CopyTo(copy, 0);
            IntPtr p = Alloc(sizeof(int) * copy.Length);
            Marshal.Copy(copy, 0, p, copy.Length);
            return p;
        }

        /// <summary>
        /// A const char* const[] of UTF-8 copies; NULL when empty. `what` names
        /// the strings in the message of a null one.
        /// </summary>
        public IntPtr Utf8StringArray(IList<string> values, string what = "stop strings")
        {
            if (values == null || values.Count == 0) return IntPtr.Zero;
            IntPtr array = Alloc(IntPtr.Size * values.Count);
            for (int i = 0; i < values.Count; i++)
            {
                if (values[i] == null) throw new ArgumentException(what + " must not be null");
                Marshal.WriteIntPtr(array, i * IntPtr.Size, Utf8String(values[i]));
            }
            return array;
        }

        /// <summary>A copy of `value` in unmanaged memory.</summary>
        public IntPtr Struct<T>(T value) where T : struct
        {
            IntPtr p = Alloc(Marshal.SizeOf(typeof(T)));
            Marshal.StructureToPtr(value, p, false);
            return p;
        }

        private IntPtr Alloc(int bytes)
        {
            IntPtr p = Marshal.AllocHGlobal(Math.Max(bytes, 1));
            allocations.Add(p);
            return p;
        }

        public void Dispose()
        {
            foreach (IntPtr p in allocations) Marshal.FreeHGlobal(p);
            allocations.Clear();
        }
    }
}
