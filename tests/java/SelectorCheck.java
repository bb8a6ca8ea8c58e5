// Evaluates SQL92 selectors with RocketMQ's own filter module (rocketmq-filter 4.9.4), for
// tests/test_sql92_reference.py. Input on stdin, one case a line: the expression, then the
// property pairs, each field base64 (UTF-8), separated by spaces; a pair is "key=value".
// Output, one line a case: INVALID, or the evaluation: TRUE, FALSE, NULL or ERROR (an exception).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import org.apache.rocketmq.filter.FilterFactory;
import org.apache.rocketmq.filter.expression.EvaluationContext;
import org.apache.rocketmq.filter.expression.Expression;

public class SelectorCheck {
    static String text(String b64) {
        return new String(Base64.getDecoder().decode(b64), StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] fields = line.split(" ", -1);
            final Map<String, String> props = new HashMap<String, String>();
            for (int i = 1; i < fields.length; i++) {
                String pair = text(fields[i]);
                int eq = pair.indexOf('=');
                props.put(pair.substring(0, eq), pair.substring(eq + 1));
            }
            Expression e;
            try {
                e = FilterFactory.INSTANCE.get("SQL92").compile(text(fields[0]));
            } catch (Throwable t) {
                out.append("INVALID\n");
                continue;
            }
            EvaluationContext ctx = new EvaluationContext() {
                public Object get(String name) {
                    return props.get(name);
                }

                public Map<String, Object> keyValues() {
                    return new HashMap<String, Object>(props);
                }
            };
            try {
                Object r = e.evaluate(ctx);
                out.append(r == null ? "NULL" : r == Boolean.TRUE ? "TRUE" : r == Boolean.FALSE ? "FALSE"
                    : "OTHER " + r).append('\n');
            } catch (Throwable t) {
                out.append("ERROR\n");
            }
        }
        System.out.print(out);
    }
}
