package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/version"
)

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print sluice's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := parseOutput(output)
			if err != nil {
				return err
			}
			info := version.Get()
			if format.structured() {
				return writeStructured(cmd.OutOrStdout(), format, info)
			}
			commit := ""
			if info.Commit != "" && info.Commit != info.Version {
				commit = " (" + info.Commit + ")"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "sluice %s%s %s %s\n", info.Version, commit, info.GoVersion, info.Platform)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", outputHelp)
	return cmd
}
