package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;

/**
 * The catalog's link to the Python catalog: one JSON request, one JSON answer
 * (protocol: catalog/spark/control.py).
 *
 * <p>Two transports carry the same bodies: a child process
 * ({@code python -m catalog.spark}, one line per request on stdin/stdout), or
 * {@code lakekv serve} at {@code POST <uri>/lakekv/v1/spark-control}.
 */
abstract class ControlPlane implements AutoCloseable {
    static final ObjectMapper JSON = new ObjectMapper();

    /** Sends {@code {"op": op, "args": args}} and returns the answer's result, or throws the error it reports. */
    final JsonNode call(String op, ObjectNode args) {
        ObjectNode request = JSON.createObjectNode();
        request.put("op", op);
        request.set("args", args == null ? JSON.createObjectNode() : args);
        JsonNode answer = exchange(request);
        if (answer.path("ok").asBoolean(false)) {
            return answer.path("result");
        }
        throw ControlErrors.toException(answer.path("error"));
    }

    static ObjectNode args() {
        return JSON.createObjectNode();
    }

    protected abstract JsonNode exchange(ObjectNode request);

    @Override
    public abstract void close();

    /** The no-server transport: a long-lived Python child of this JVM. */
    static final class Child extends ControlPlane {
        private final Process process;
        private final BufferedWriter toChild;
        private final BufferedReader fromChild;

        Child(String python, String url, Map<String, String> storageOptions) {
            ProcessBuilder builder = new ProcessBuilder(python, "-m", "catalog.spark");
            // The child's diagnostics go to this JVM's stderr; its stdout is the protocol.
            builder.redirectError(ProcessBuilder.Redirect.INHERIT);
            try {
                process = builder.start();
            } catch (IOException e) {
                throw new IllegalArgumentException(
                        "cannot start the lakehouse control plane with python '" + python
                                + "' (catalog option python, or PYSPARK_PYTHON): " + e.getMessage(), e);
            }
            toChild = new BufferedWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8));
            fromChild = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
            ObjectNode open = args();
            open.put("url", url);
            ObjectNode options = open.putObject("options");
            storageOptions.forEach(options::put);
            call("open", open);
        }

        @Override
        protected synchronized JsonNode exchange(ObjectNode request) {
            try {
                toChild.write(JSON.writeValueAsString(request));
                toChild.write('\n');
                toChild.flush();
                String line = fromChild.readLine();
                if (line == null) {
                    throw new IllegalStateException(exited());
                }
                return JSON.readTree(line);
            } catch (IOException e) {
                throw new IllegalStateException(exited() + ": " + e.getMessage(), e);
            }
        }

        private String exited() {
            String status = process.isAlive() ? "closed its output" : "exited with status " + process.exitValue();
            return "the lakehouse control plane (python -m catalog.spark) " + status
                    + "; its stderr above says why (is lakekv installed for that python?)";
        }

        @Override
        public synchronized void close() {
            try {
                toChild.close();  // the child exits when its stdin closes
            } catch (IOException e) {
                process.destroy();
            }
        }
    }

    /** The shared-server transport: {@code lakekv serve} answers the same requests over HTTP. */
    static final class Http extends ControlPlane {
        private final HttpClient client = HttpClient.newBuilder()
                // HTTP/1.1: the default h2c upgrade request is refused by the server.
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(10))
                .build();
        private final URI endpoint;
        private final String token;

        Http(String uri, String token) {
            this.endpoint = URI.create(uri.replaceAll("/+$", "") + "/lakekv/v1/spark-control");
            this.token = token;
            call("hello", args());
        }

        @Override
        protected JsonNode exchange(ObjectNode request) {
            try {
                HttpRequest.Builder builder = HttpRequest.newBuilder(endpoint)
                        .timeout(Duration.ofMinutes(5))
                        .header("Content-Type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofString(JSON.writeValueAsString(request)));
                if (token != null) {
                    builder.header("Authorization", "Bearer " + token);
                }
                HttpResponse<String> response = client.send(builder.build(), HttpResponse.BodyHandlers.ofString());
                JsonNode body = JSON.readTree(response.body());
                if (response.statusCode() != 200 && !body.has("ok")) {
                    throw new IllegalStateException("lakekv serve at " + endpoint + " answered HTTP "
                            + response.statusCode() + ": " + body.path("error").path("message").asText(response.body()));
                }
                return body;
            } catch (IOException e) {
                throw new IllegalStateException("cannot reach lakekv serve at " + endpoint + ": " + e.getMessage(), e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for lakekv serve", e);
            }
        }

        @Override
        public void close() {
        }
    }
}
