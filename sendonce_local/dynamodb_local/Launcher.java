// DynamoDB Local, in memory, listening on 127.0.0.1 only.
//
// The jar's own ServerRunner binds every interface and has no option to choose one. This builds the
// same request handler the runner builds, through the jar's public classes, and serves it from a
// Jetty connector bound to the loopback address. Port 0 lets the system pick a free port; the port
// taken is printed as `listening 127.0.0.1:<port>`. The server stops when its standard input closes,
// so it never outlives the process that started it. No telemetry is configured, so none is sent.
//
// Run in source-file mode, with the jar and its DynamoDBLocal_lib on the class path:
//   java -Djava.library.path=<lib> -cp '<jar>:<lib>/*' Launcher.java [port]

import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;
import software.amazon.dynamodb.services.local.server.LocalDynamoDBRequestHandler;
import software.amazon.dynamodb.services.local.server.LocalDynamoDBServerHandler;

public final class Launcher {
    private Launcher() {}

    public static void main(String[] args) throws Exception {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        // (unused port, in memory, no db path, one database for every region and key, no delays)
        LocalDynamoDBServerHandler handler =
                new LocalDynamoDBServerHandler(new LocalDynamoDBRequestHandler(0, true, null, true, false), null);
        Server server = new Server();
        ServerConnector connector = new ServerConnector(server);
        connector.setHost("127.0.0.1");
        connector.setPort(port);
        server.addConnector(connector);
        // Only its handler tree is used: this proxy server itself is never started.
        server.setHandler(new DynamoDBProxyServer(port, handler).setUpHandler(handler));
        server.start();
        System.out.println("listening 127.0.0.1:" + connector.getLocalPort());
        System.out.flush();
        while (System.in.read() != -1) {
            // wait for the end of standard input
        }
        server.stop();
        System.exit(0);
    }
}
