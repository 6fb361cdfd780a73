import Foundation

extension HealthReport {
    /// One self-contained HTML file: inline CSS and SVG, no script, no external resource, so it opens offline.
    package var html: String {
        let outcomes = DayType.columns.compactMap { column in
            column.chartColor.map { (name: column.name, color: $0, value: column.value) }
        }
        let dayList = Array(Set(volume.map(\.day) + invalidTokenRate.map(\.day))).sorted()
        var perDay: [String: [Int]] = [:]
        for row in volume {
            var totals = perDay[row.day] ?? Array(repeating: 0, count: outcomes.count)
            for (i, outcome) in outcomes.enumerated() { totals[i] += outcome.value(row) }
            perDay[row.day] = totals
        }
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>Delivery health \(escape(from)) – \(escape(to))</title>
            <style>
            body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem;color:#222;max-width:1100px}
            h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
            table{border-collapse:collapse;font-size:.9rem}td,th{border:1px solid #ddd;padding:.25rem .6rem;text-align:right;white-space:nowrap}
            th{background:#f5f5f5}td:first-child,th:first-child,td.text{text-align:left}
            svg{max-width:100%;height:auto}
            .legend span{display:inline-block;margin-right:1rem;font-size:.85rem}
            .legend i{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:middle}
            svg text{font-size:11px;fill:#555}
            </style></head><body>
            <h1>Delivery health</h1>
            <p>\(escape(from)) to \(escape(to)) (\(days) days, UTC days of the claim).</p>
            <h2>Daily volume by outcome</h2>
            <div class="legend">\(outcomes.map { "<span><i style=\"background:\($0.color)\"></i>\($0.name)</span>" }.joined())</div>
            \(stackedBars(days: dayList, perDay: perDay, colors: outcomes.map(\.color)))
            <h2>Invalid-token rate</h2>
            \(rateLine(days: dayList))
            <h2>Per day and notification type</h2>
            \(table(["day", "type"] + DayType.columns.map(\.name),
                volume.map { row in [row.day, row.type] + DayType.columns.map { String($0.value(row)) } }))
            <h2>Deliveries by provider and outcome</h2>
            \(table(["provider/outcome", "deliveries"], deliveries.map { [$0.key, String($0.count)] }))
            <h2>Provider answer times</h2>
            <p>From a request written to its answer; each percentile is the bucket it falls in.</p>
            \(table(["provider", "answers", "p50", "p95", "p99"], answerTimes.map { [$0.provider, String($0.answers), AnswerTimes.bound($0.p50Ms), AnswerTimes.bound($0.p95Ms), AnswerTimes.bound($0.p99Ms)] }))
            <h2>Active devices</h2>
            \(table(["platform/provider/kind", "devices"], activeDevices.map { [$0.key, String($0.count)] }))
            <h2>Deactivations by reason</h2>
            \(table(["reason", "devices"], deactivations.map { [$0.key, String($0.count)] }))
            <h2>Last run of each job</h2>
            \(table(["job", "run at", "outcome", "duration"], lastRuns.map { [$0.job, $0.runAt, $0.outcomeText + $0.errorText, $0.durationText ?? ""] }))
            <h2>Runs of each job in the window</h2>
            \(table(["job", "runs", "no end recorded", "the last of those", "failed", "last failed", "its error"], runsInWindow.map { [$0.job, String($0.runs), String($0.unfinished), $0.lastUnfinishedAt ?? "", String($0.failed), $0.lastFailedAt ?? "", $0.lastError ?? ""] }))
            <h2>Does the reminder work?</h2>
            <p>Share of reminded users who wrote within 3 hours, per locale and message, with its 95 % interval.
            Messages are assigned by a stable hash of user and day: within a locale this is a randomised comparison.</p>
            \(effectChart())
            \(heldOutOnly ? "<p>Words learn: the held-out (uniform) choices only; the last column is each message's chance of being chosen now.</p>" : "")
            \(reminderEffect.isEmpty ? "" : table(["locale", "message", "title", "reminded", "wrote ≤ 3 h", "95 % interval", "wrote that day", "95 % interval"] + (heldOutOnly ? ["chance now"] : []),
                 reminderEffect.map { [$0.locale, String($0.messageIndex), $0.title ?? "", String($0.reminded),
                                       percent($0.within3h.share), "\(percent($0.within3h.low)) – \(percent($0.within3h.high))",
                                       percent($0.sameLocalDay.share), "\(percent($0.sameLocalDay.low)) – \(percent($0.sameLocalDay.high))"]
                                       + (heldOutOnly ? [$0.chance.map(percent) ?? ""] : []) }))
            <h2>Reminders paused for users who ignored them</h2>
            \(table(["paused now", "pauses started in the window", "of whom wrote again"],
                   [[String(pauses.paused), String(pauses.started), String(pauses.cameBack)]]))
            <h2>Reminded users whose language has no words in the catalog</h2>
            <p>They were sent the \(escape(CopyCatalog.fallbackLocale)) words; by the language their locale names.</p>
            \(table(["language", "users"], readersWithoutWords.map { [$0.key, String($0.count)] }))
            </body></html>
            """
    }

    private func percent(_ value: Double) -> String { String(format: "%.1f %%", value * 100) }

    /// One horizontal bar per message (its 3-hour share) with the interval as a whisker.
    private func effectChart() -> String {
        guard !reminderEffect.isEmpty else { return "<p>No reminders in this window.</p>" }
        let rowHeight = 22
        let labelWidth = 160
        let barWidth = 600
        var parts: [String] = []
        for (i, message) in reminderEffect.enumerated() {
            let y = i * rowHeight
            let x = { (value: Double) in labelWidth + Int(value * Double(barWidth)) }
            parts.append(
                "<text x=\"0\" y=\"\(y + 15)\">\(escape(message.locale)) #\(message.messageIndex) (n=\(message.reminded))</text>"
            )
            parts.append(
                "<rect x=\"\(labelWidth)\" y=\"\(y + 4)\" width=\"\(x(message.within3h.share) - labelWidth)\" height=\"14\" fill=\"#2e7d32\"/>"
            )
            parts.append(
                "<line x1=\"\(x(message.within3h.low))\" x2=\"\(x(message.within3h.high))\" y1=\"\(y + 11)\" y2=\"\(y + 11)\" stroke=\"#222\" stroke-width=\"2\"/>"
            )
        }
        let height = reminderEffect.count * rowHeight + 4
        return
            "<svg role=\"img\" aria-label=\"Share who wrote within 3 hours, per message\" viewBox=\"0 0 \(labelWidth + barWidth + 10) \(height)\" width=\"\(labelWidth + barWidth + 10)\" height=\"\(height)\">"
            + parts.joined() + "</svg>"
    }

    private func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    private func table(_ header: [String], _ rows: [[String]]) -> String {
        guard !rows.isEmpty else { return "<p>none</p>" }
        return "<table><tr>" + header.map { "<th>\(escape($0))</th>" }.joined() + "</tr>"
            + rows.map {
                "<tr>"
                    + $0.map { cell in
                        Int(cell) == nil ? "<td class=\"text\">\(escape(cell))</td>" : "<td>\(escape(cell))</td>"
                    }.joined() + "</tr>"
            }.joined() + "</table>"
    }

    private func stackedBars(days: [String], perDay: [String: [Int]], colors: [String]) -> String {
        guard !days.isEmpty else { return "<p>no notifications in this window</p>" }
        let width = 1000.0
        let height = 260.0
        let left = 50.0
        let bottom = 30.0
        let maxTotal = max(1, days.map { (perDay[$0] ?? []).reduce(0, +) }.max() ?? 1)
        let slot = (width - left) / Double(days.count)
        var svg =
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" aria-label=\"daily volume by outcome\">"
        svg +=
            "<line x1=\"\(left)\" y1=\"\(height - bottom)\" x2=\"\(width)\" y2=\"\(height - bottom)\" stroke=\"#999\"/>"
        svg +=
            "<text x=\"\(left - 6)\" y=\"14\" text-anchor=\"end\">\(maxTotal)</text><text x=\"\(left - 6)\" y=\"\(height - bottom)\" text-anchor=\"end\">0</text>"
        for (i, day) in days.enumerated() {
            var y = height - bottom
            let x = left + Double(i) * slot + slot * 0.15
            for (k, value) in (perDay[day] ?? []).enumerated() where value > 0 {
                let h = (height - bottom - 10) * Double(value) / Double(maxTotal)
                y -= h
                svg +=
                    "<rect x=\"\(format(x))\" y=\"\(format(y))\" width=\"\(format(slot * 0.7))\" height=\"\(format(h))\" fill=\"\(colors[k])\"><title>\(day): \(value)</title></rect>"
            }
            if days.count <= 16 || i % max(1, days.count / 10) == 0 {
                svg +=
                    "<text x=\"\(format(x + slot * 0.35))\" y=\"\(height - 10)\" text-anchor=\"middle\">\(day.dropFirst(5))</text>"
            }
        }
        return svg + "</svg>"
    }

    private func rateLine(days: [String]) -> String {
        let rates = Dictionary(uniqueKeysWithValues: invalidTokenRate.map { ($0.day, $0.rate) })
        let points = days.compactMap { day in rates[day].map { (day, $0) } }
        guard !points.isEmpty else { return "<p>no deliveries in this window</p>" }
        let width = 1000.0
        let height = 200.0
        let left = 50.0
        let bottom = 30.0
        let top = max(0.01, points.map(\.1).max() ?? 0.01)
        let slot = (width - left) / Double(days.count)
        let index = Dictionary(uniqueKeysWithValues: days.enumerated().map { ($1, $0) })
        let coordinates = points.map { day, rate in
            (left + (Double(index[day]!) + 0.5) * slot, height - bottom - (height - bottom - 10) * rate / top)
        }
        var svg =
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" aria-label=\"invalid-token rate\">"
        svg +=
            "<line x1=\"\(left)\" y1=\"\(height - bottom)\" x2=\"\(width)\" y2=\"\(height - bottom)\" stroke=\"#999\"/>"
        svg +=
            "<text x=\"\(left - 6)\" y=\"14\" text-anchor=\"end\">\(String(format: "%.1f", top * 100)) %</text><text x=\"\(left - 6)\" y=\"\(height - bottom)\" text-anchor=\"end\">0 %</text>"
        svg +=
            "<polyline fill=\"none\" stroke=\"#c62828\" stroke-width=\"2\" points=\""
            + coordinates.map { "\(format($0.0)),\(format($0.1))" }.joined(separator: " ") + "\"/>"
        for ((day, rate), point) in zip(points, coordinates) {
            svg +=
                "<circle cx=\"\(format(point.0))\" cy=\"\(format(point.1))\" r=\"3\" fill=\"#c62828\"><title>\(day): \(String(format: "%.2f", rate * 100)) %</title></circle>"
        }
        return svg + "</svg>"
    }

    private func format(_ value: Double) -> String { String(format: "%.1f", value) }
}
