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

        /// <summary>
        /// `s` unchanged (null too), or PvllmException InvalidArgument when it
        /// holds a NUL character: C would take it for the string's end and
        /// silently read less. `what` names `s` in the message ("a stop
        /// string"). The binding's one NUL check, for every input it refuses
        /// to let C cut short.
        /// </summary>
        internal static string NulFree(string s, string what)
        {
            if (s != null && s.IndexOf('\0') >= 0)
            {
                throw new PvllmException(PvllmStatus.InvalidArgument, what + " contains a NUL character");
            }
            return s;
        }
    }

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

    /// <summary>A C call that writes token ids into a buffer (ids, capacity, *count, *error).</summary>
    internal delegate PvllmStatus IdsCall(int[] ids, UIntPtr capacity, out UIntPtr count, out IntPtr error);

    /// <summary>
    /// Runs an IdsCall (pvllm_tokenize, pvllm_tokenizer_encode) with room for
    /// the ids of `utf8` (NUL-terminated), growing once when it answers
    /// BufferTooSmall with the count it needs; throws PvllmException for any
    /// other failure.
    /// </summary>
    internal static class IdBuffer
    {
        internal static int[] Read(byte[] utf8, IdsCall call)
        {
            // Every token covers at least one byte; BOS and a dummy-prefix
            // token may come on top, so this is usually big enough at once.
            var ids = new int[utf8.Length + 2];
            while (true)
            {
                UIntPtr needed;
                IntPtr error;
                PvllmStatus status = call(ids, (UIntPtr)(uint)ids.Length, out needed, out error);
                int count = checked((int)needed.ToUInt64());
                if (status == PvllmStatus.BufferTooSmall && count > ids.Length)
                {
                    NativeMethods.pvllm_error_free(error);
                    ids = new int[count];
                    continue;
                }
                PvllmException.Check(status, error);
                Array.Resize(ref ids, count);
                return ids;
            }
        }
    }

    /// <summary>
    /// Unmanaged memory that lives for one native call: UTF-8 strings, int
    /// arrays and structs the C structs point at. The library copies inputs
    /// before returning, so everything is freed right after the call.
    /// </summary>
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
        /// Utf8String of a string C must read whole: PvllmException
        /// InvalidArgument when `s` holds a NUL (see Utf8.NulFree; `what`
        /// names it in the message).
        /// </summary>
        public IntPtr NulFreeUtf8String(string s, string what) => Utf8String(Utf8.NulFree(s, what));

        /// <summary>
        /// A const char* const[] of UTF-8 copies; NULL when empty. `what` names
        /// one string ("a stop string") in the exception for a null one
        /// (ArgumentException) or one holding a NUL (PvllmException
        /// InvalidArgument, from NulFreeUtf8String).
        /// </summary>
        public IntPtr Utf8StringArray(IList<string> values, string what)
        {
            if (values == null || values.Count == 0) return IntPtr.Zero;
            IntPtr array = Alloc(IntPtr.Size * values.Count);
            for (int i = 0; i < values.Count; i++)
            {
                if (values[i] == null) throw new ArgumentException(what + " must not be null");
                Marshal.WriteIntPtr(array, i * IntPtr.Size, NulFreeUtf8String(values[i], what));
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
