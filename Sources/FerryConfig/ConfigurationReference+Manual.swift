/// The `ferry.toml(5)` manual page (man(7) macros), rendered from ``ConfigurationReference``.
extension ConfigurationReference {
    /// The whole page. `date` is the page's date (`YYYY-MM-DD`), `version` Ferry's.
    public static func manualPage(date: String, version: String) -> String {
        var page = [
            #".TH FERRY.TOML 5 "\#(date)" "Ferry \#(version)" "File Formats""#,
            ".SH NAME",
            #"ferry.toml \- the configuration of ferryd, the Ferry upload daemon"#,
            ".SH SYNOPSIS",
            ".B /etc/ferry/ferry.toml",
            ".SH DESCRIPTION",
            "A TOML file: top-level keys for the daemon, then one",
            ".B [[spool]]",
            "table per watched directory.",
            ".PP",
            Roff.paragraph(introduction),
            ".SH TOP-LEVEL KEYS",
        ]
        page += keys.filter { $0.table == .topLevel }.flatMap(manualEntry)
        page += [".SH SPOOL KEYS", #"Each \fB[[spool]]\fR table:"#]
        page += keys.filter { $0.table != .topLevel }.flatMap(manualEntry)
        page += [
            ".SH PLACEHOLDERS AND SECRETS",
            Roff.paragraph(placeholders),
            ".SH EXAMPLE",
            ".EX",
            "[[spool]]",
            #"name = "media""#,
            #"directory = "/var/spool/ferry/media""#,
            #"url = "https://uploads.example/api/media""#,
            "",
            "[spool.headers]",
            #"Authorization = "Bearer ${credential:media-token}""#,
            ".EE",
            ".SH FILES",
            ".TP",
            ".I /etc/ferry/ferry.toml",
            "the configuration ferryd reads by default",
            ".TP",
            ".I /usr/share/doc/ferry/ferry.toml.example",
            "a commented example (below /usr/local/share with make install)",
            ".TP",
            ".I /usr/share/doc/ferry/examples/",
            "Prometheus alerts and a Grafana dashboard for ferryd's metrics",
            ".SH SEE ALSO",
            ".BR ferryd (8),",
            ".BR ferryctl (1),",
            ".BR systemd.exec (5)",
        ]
        return page.joined(separator: "\n") + "\n"
    }

    /// One key as a tagged paragraph: the key(s) in bold, the default, the meaning.
    static func manualEntry(_ row: ConfigurationKeyReference) -> [String] {
        let keys: String
        if row.isSubTable {
            keys = #"\fB["# + Roff.text(row.table.rawValue + "." + row.names[0]) + #"]\fR"#
        } else {
            let names = row.names.map { #"\fB"# + Roff.text($0) + #"\fR"# }.joined(separator: ", ")
            switch row.table {
            case .topLevel, .spool: keys = names
            case .spoolRetry, .spoolHooks: keys = #"\fB["# + Roff.text(row.table.rawValue) + #"]\fR "# + names
            }
        }
        return [".TP", keys, Roff.paragraph(row.meaning) + " (default: " + Roff.paragraph(row.defaultValue) + ")"]
    }
}
