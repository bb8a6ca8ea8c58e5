/*
 * The two helpers that the reference StoreCheck (shared/reference/java) expects beside it: a socket
 * address as "ip:port" ("[ip6]:port" for IPv6) and a JSON writer for its report (maps, collections,
 * arrays, strings, numbers, booleans, null; pretty-printed with two spaces a level). rocketq's own code,
 * compiled with StoreCheck by tests/test_store_reference.py only.
 */

import java.io.IOException;
import java.io.Writer;
import java.lang.reflect.Array;
import java.net.Inet6Address;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.Collection;
import java.util.Iterator;
import java.util.Map;

public final class GoldenClient {
    private GoldenClient() {}

    public static String host(SocketAddress a) {
        if (a == null) return null;
        if (a instanceof InetSocketAddress) {
            InetSocketAddress s = (InetSocketAddress) a;
            String ip = s.getAddress() == null ? s.getHostString() : s.getAddress().getHostAddress();
            if (s.getAddress() instanceof Inet6Address) ip = "[" + ip + "]";
            return ip + ":" + s.getPort();
        }
        return a.toString();
    }

    public static void writeValue(Writer w, Object v, int level) throws IOException {
        if (v == null) {
            w.write("null");
        } else if (v instanceof String || v instanceof Character || v instanceof Enum) {
            writeString(w, v.toString());
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            w.write(Double.isFinite(d) ? v.toString() : "null");
        } else if (v instanceof Number || v instanceof Boolean) {
            w.write(v.toString());
        } else if (v instanceof Map) {
            Map<?, ?> m = (Map<?, ?>) v;
            if (m.isEmpty()) {
                w.write("{}");
                return;
            }
            w.write("{");
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                w.write(first ? "\n" : ",\n");
                first = false;
                indent(w, level + 1);
                writeString(w, String.valueOf(e.getKey()));
                w.write(": ");
                writeValue(w, e.getValue(), level + 1);
            }
            w.write("\n");
            indent(w, level);
            w.write("}");
        } else if (v instanceof Collection || v.getClass().isArray()) {
            Iterator<?> it = v instanceof Collection ? ((Collection<?>) v).iterator() : arrayIterator(v);
            if (!it.hasNext()) {
                w.write("[]");
                return;
            }
            w.write("[");
            boolean first = true;
            while (it.hasNext()) {
                w.write(first ? "\n" : ",\n");
                first = false;
                indent(w, level + 1);
                writeValue(w, it.next(), level + 1);
            }
            w.write("\n");
            indent(w, level);
            w.write("]");
        } else {
            writeString(w, v.toString());
        }
    }

    private static Iterator<Object> arrayIterator(Object array) {
        int n = Array.getLength(array);
        return new Iterator<Object>() {
            int i = 0;
            public boolean hasNext() { return i < n; }
            public Object next() { return Array.get(array, i++); }
        };
    }

    private static void indent(Writer w, int level) throws IOException {
        for (int i = 0; i < level; i++) w.write("  ");
    }

    private static void writeString(Writer w, String s) throws IOException {
        StringBuilder b = new StringBuilder(s.length() + 2);
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        b.append('"');
        w.write(b.toString());
    }
}
