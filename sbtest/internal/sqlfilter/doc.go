// Package sqlfilter parses and evaluates the Service Bus SQL filter and SQL rule action
// languages, the SQL-92 subset that topic subscription rules use.
//
// Sources: "Subscription Rule SQL Filter Syntax" (service-bus-messaging-sql-filter) and
// "Subscription Rule SQL Action Syntax" (service-bus-messaging-sql-rule-action) in the
// Service Bus documentation; the system property names come from "Messages, payloads, and
// serialization".
//
// Supported: comparisons (= <> != > >= < <=), AND/OR/NOT with three-valued logic,
// [NOT] IN, [NOT] LIKE with % and _ and ESCAPE, IS [NOT] NULL, EXISTS(property),
// arithmetic (+ - * / % and unary + -), integer, decimal, approximate, string, TRUE,
// FALSE and NULL constants, @parameters, sys. and user. scopes, regular, "quoted" and
// [delimited] identifiers, the functions newid() and property(name); actions
// SET property = expression and REMOVE property, separated by optional semicolons.
//
// Type rules: integers are int64, decimal and approximate constants are float64; an
// int64 meets a float64 as float64, as C# promotion does. A missing user property, NULL,
// or an operation on mismatched types (a string compared with a number, a division by
// an integer zero) is unknown; a filter whose result is unknown does not match. Strings
// compare ordinally; booleans only with = and <>; time.Time values with each other.
// Referring to a system property that does not exist is a parse error, as the documents
// say; one that exists but is not set on the message is unknown.
//
// Hostile input is bounded: expressions longer than [MaxLength] characters, nesting
// deeper than [MaxDepth], and actions with more than [MaxActionStatements] statements
// are refused at parse time; the work of evaluating one message is bounded by a
// [Budget] of [MaxEvalCost] steps (bytes of strings built, compared or matched), beyond
// which [Filter.Match] and [Action.Apply] return [ErrCostExceeded] instead of a result.
//
// Parsed filters and actions are immutable and safe for concurrent use.
package sqlfilter
